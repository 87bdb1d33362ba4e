"""The run's reward pipeline from config: the environment's grade, TRL reward functions (reward.functions), a reward
model's score, an LLM judge (an endpoint, the policy's engine or an engine of its own), and the guards. The actors it
calls (a reward model's, a judge's own engine) are the caller's, started by the actor builder (cluster/workers.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.rewards.judge import EngineBackend, Judge
from flywheel.rewards.pipeline import RewardPipeline, Scorer, resolve_guards, reward_model_scorer
from flywheel.rewards.trl_functions import trl_scorer
from flywheel.rewards.user_functions import load_function


def task_scores(completions: list[str], tasks: list[dict]) -> tuple[list[float], dict[str, float]]:
    """The environment's own grade, computed before the pipeline."""
    return [t["reward"] for t in tasks], {}


def reward_pipeline(
    config: Config,
    env_guards: Sequence[str],
    policy_engine: Engine,
    judge_engine: Engine | None = None,
    score_texts: Callable[[list[str]], Awaitable[list[float]]] | None = None,
) -> RewardPipeline | None:
    """The configured reward pipeline (the task's grade + reward functions + judge + reward model, then the guards);
    None when ``reward`` configures nothing beyond the task's grade. ``policy_engine``: what a judge on the policy's
    engines calls, the run's router (so it follows a replica the router restarts); ``judge_engine``: the judge's own
    engine (``reward.judge.engine: own``), behind a router that restarts it; ``score_texts``: the reward model's
    scoring call (``reward.reward_model.path``)."""
    r = config.reward
    if not (resolve_guards(r, env_guards) or r.judge.enabled or r.reward_model.path or r.functions):
        return None
    scorers, judge = [Scorer("task", task_scores)], None
    scorers += [trl_scorer(load_function(f.name), f.metric, f.weight, r.function_timeout_s) for f in r.functions]
    if r.reward_model.path:
        if score_texts is None:
            raise ValueError("reward.reward_model.path is set but no reward model actor was started for it")
        scorers.append(reward_model_scorer(score_texts, r.reward_model.weight))
    if r.judge.enabled and r.judge.engine != "endpoint":  # a vLLM engine in the run
        engine, path = policy_engine, config.model.path
        if r.judge.engine == "own":
            if judge_engine is None:
                raise ValueError("reward.judge.engine is 'own' but no judge engine was started for it")
            engine, path = judge_engine, r.judge.model_path
        backend = EngineBackend(engine, path, max_tokens=r.judge.max_tokens, seed=config.run.seed)
        judge = Judge(backend, structured=r.judge.structured_output, max_block_chars=r.judge.max_block_chars)
    return RewardPipeline.from_config(r, rubric=None, scorers=scorers, judge=judge, env_guards=env_guards)
