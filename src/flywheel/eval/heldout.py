"""One episode of every held-out task on the run's engines: accuracy and the environment's metrics."""

from __future__ import annotations

import asyncio

from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.rollout.group import episode_metrics, run_group
from flywheel.rollout.stream import TaskSet


async def evaluate(engine: Engine, tokenizer, tasks: TaskSet, temperature: float, config: Config) -> dict[str, float]:
    """One episode of every held-out task (task k samples with seed run.seed + k): accuracy (mean
    reward of the valid episodes) and the environment's tool and turn metrics."""
    seed, max_tokens = config.run.seed, config.rollout.max_new_tokens
    runs = (run_group(engine, tokenizer, tasks.env_factory, task, 1, temperature, max_tokens, seed + k) for k, task in enumerate(tasks.eval))
    episodes = [e for group in await asyncio.gather(*runs) for e in group]
    valid = [e for e in episodes if e.valid]
    return {"accuracy": sum(e.reward for e in valid) / max(len(valid), 1)} | episode_metrics(episodes, tasks.has_tools)


async def eval_metrics(engine: Engine, tokenizer, tasks: TaskSet, config: Config) -> dict[str, float]:
    """eval/... at the eval temperature and, if asked, eval/greedy_accuracy (temperature 0)."""
    metrics = {f"eval/{key}": value for key, value in (await evaluate(engine, tokenizer, tasks, config.eval.temperature, config)).items()}
    if config.eval.greedy:
        metrics["eval/greedy_accuracy"] = (await evaluate(engine, tokenizer, tasks, 0.0, config))["accuracy"]
    return metrics
