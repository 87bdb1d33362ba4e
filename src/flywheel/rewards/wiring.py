"""The run's reward pipeline from config: the environment's grade, TRL reward functions (reward.functions), a reward
model in its own Ray actor, an LLM judge (an endpoint, the policy's engine or an engine of its own), and the guards;
and what stops the actors."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ray

from flywheel.cluster.workers import start_engines
from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.rewards.judge import EngineBackend, Judge
from flywheel.rewards.pipeline import RewardPipeline, Scorer, resolve_guards, reward_model_scorer
from flywheel.rewards.trl_functions import trl_scorer
from flywheel.rewards.user_functions import load_function


def task_scores(completions: list[str], tasks: list[dict]) -> tuple[list[float], dict[str, float]]:
    """The environment's own grade, computed before the pipeline."""
    return [t["reward"] for t in tasks], {}


def reward_pipeline(config: Config, env_guards: Sequence[str], policy_engine: Engine) -> tuple[RewardPipeline | None, Callable[[], None]]:
    """The configured reward pipeline (the task's grade + reward functions + judge + reward model, then the guards) and
    a function stopping the actors it started (reward model, judge engine); None when ``reward``
    configures nothing beyond the task's grade. ``policy_engine``: what a judge on the policy's
    engines calls, the run's router (so it follows a replica the router restarts)."""
    r = config.reward
    models: list[ray.actor.ActorHandle] = []
    engines: list[Engine] = []

    def stop() -> None:
        for actor in models:
            ray.kill(actor)
        for engine in engines:
            engine.shutdown()

    if not (resolve_guards(r, env_guards) or r.judge.enabled or r.reward_model.path or r.functions):
        return None, stop
    scorers, judge = [Scorer("task", task_scores)], None
    scorers += [trl_scorer(load_function(f.name), f.metric, f.weight) for f in r.functions]
    if r.reward_model.path:
        from flywheel.rewards.reward_model import RewardModel

        rm = r.reward_model
        model = ray.remote(RewardModel).options(num_cpus=0).remote(rm.path, batch_size=rm.batch_size, max_length=rm.max_length, threads=1)
        scorers.append(reward_model_scorer(model.score.remote, rm.weight))
        models.append(model)
    if r.judge.enabled and r.judge.engine != "endpoint":  # a vLLM engine in the run; it cannot constrain output
        if r.judge.engine == "own":
            judge_config = config.model_copy(
                update={
                    "model": config.model.model_copy(update={"path": r.judge.model_path}),
                    "rollout": config.rollout.model_copy(update={"engines": 1}),
                }
            )
            engines += start_engines(judge_config, cpus=0)
        engine = engines[0] if r.judge.engine == "own" else policy_engine
        path = r.judge.model_path if r.judge.engine == "own" else config.model.path
        judge = Judge(EngineBackend(engine, path, max_tokens=r.judge.max_tokens, seed=config.run.seed), structured=False)
    return RewardPipeline.from_config(r, rubric=None, scorers=scorers, judge=judge, env_guards=env_guards), stop
