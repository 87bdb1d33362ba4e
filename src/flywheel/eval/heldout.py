"""One episode of every held-out task on the run's engines: accuracy and the environment's metrics."""

from __future__ import annotations

import asyncio

from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.rollout.group import episode_metrics, run_group
from flywheel.rollout.stream import TaskSet, load_tasks, within_stall_limit


async def evaluate(engine: Engine, tokenizer, tasks: TaskSet, temperature: float, config: Config) -> dict[str, float]:
    """One episode of every held-out task (task k samples with seed run.seed + k): accuracy (mean
    reward of the valid episodes) and the environment's tool and turn metrics. NoProgress when no
    episode finishes for rollout.stall_timeout_s seconds (an engine that never answers)."""
    seed, max_tokens, limit = config.run.seed, config.rollout.max_new_tokens, config.rollout.stall_timeout_s
    downtime_s = getattr(engine, "downtime_s", lambda: 0.0)  # a router's time with no live replica is not counted
    runs = [
        asyncio.ensure_future(run_group(engine, tokenizer, tasks.env_factory, task, 1, temperature, max_tokens, seed + k))
        for k, task in enumerate(tasks.eval)
    ]
    pending = set(runs)
    try:
        while pending:
            finished, pending = await within_stall_limit(
                asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED),
                limit,
                downtime_s,
                lambda: (
                    f"no held-out episode finished in {limit:g} s ({len(pending)} running): an engine that never answers, or an "
                    "environment that never returns; check the engines' logs, or raise rollout.stall_timeout_s"
                ),
            )
            for run in finished:
                run.result()  # the first failure is raised
    finally:
        for run in runs:
            run.cancel()
    episodes = [e for run in runs for e in run.result()]
    valid = [e for e in episodes if e.valid]
    return {"accuracy": sum(e.reward for e in valid) / max(len(valid), 1)} | episode_metrics(episodes, tasks.has_tools)


async def eval_metrics(engine: Engine, tokenizer, tasks: TaskSet, config: Config, more: dict[str, TaskSet] | None = None) -> dict[str, float]:
    """eval/... at the eval temperature and, if asked, eval/greedy_accuracy (temperature 0); then
    eval/<key>/... for each held-out set of eval.environments (``more``, by key)."""
    metrics = {f"eval/{key}": value for key, value in (await evaluate(engine, tokenizer, tasks, config.eval.temperature, config)).items()}
    if config.eval.greedy:
        metrics["eval/greedy_accuracy"] = (await evaluate(engine, tokenizer, tasks, 0.0, config))["accuracy"]
    for name, other in (more or {}).items():
        metrics |= {f"eval/{name}/{key}": value for key, value in (await evaluate(engine, tokenizer, other, config.eval.temperature, config)).items()}
    return metrics


def eval_sets(config: Config) -> dict[str, TaskSet]:
    """The task sets of eval.environments, by key (their train splits are made only to keep their
    held-out sets what a run on that environment would hold out)."""
    return {key: load_tasks(config.model_copy(update={"task": task})) for key, task in config.eval.environments.items()}
