"""The run's reward pipeline from config: the environment's grade, TRL reward functions (reward.functions), a reward
model in its own Ray actor, an LLM judge (an endpoint, the policy's engine or an engine of its own), and the guards;
and what stops the actors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import ray

from flywheel.cluster.workers import engine_starter, start_engines
from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.rewards.judge import EngineBackend, Judge
from flywheel.rewards.pipeline import RewardPipeline, Scorer, resolve_guards, reward_model_scorer
from flywheel.rewards.trl_functions import trl_scorer
from flywheel.rewards.user_functions import load_function
from flywheel.rollout.router import EngineRouter


def task_scores(completions: list[str], tasks: list[dict]) -> tuple[list[float], dict[str, float]]:
    """The environment's own grade, computed before the pipeline."""
    return [t["reward"] for t in tasks], {}


@dataclass
class RewardActors:
    """What ``reward_pipeline`` started: reward-model actors, and a judge's own engine behind its router."""

    models: list[ray.actor.ActorHandle] = field(default_factory=list)
    judge_router: EngineRouter | None = None

    async def stop(self) -> None:
        for actor in self.models:
            ray.kill(actor)
        if self.judge_router is not None:
            await self.judge_router.close(keep_serving=True)  # cancels a restart under way
            self.judge_router.shutdown()  # the engine in its slot, the first or a replacement


def reward_pipeline(config: Config, env_guards: Sequence[str], policy_engine: Engine) -> tuple[RewardPipeline | None, RewardActors]:
    """The configured reward pipeline (the task's grade + reward functions + judge + reward model, then the guards) and
    the actors it started; None when ``reward`` configures nothing beyond the task's grade. ``policy_engine``: what a
    judge on the policy's engines calls, the run's router (so it follows a replica the router restarts). A judge on
    its own engine calls it through a router of its own, which restarts it when it dies (``rollout.max_engine_restarts``)."""
    r = config.reward
    actors = RewardActors()
    if not (resolve_guards(r, env_guards) or r.judge.enabled or r.reward_model.path or r.functions):
        return None, actors
    scorers, judge = [Scorer("task", task_scores)], None
    scorers += [trl_scorer(load_function(f.name), f.metric, f.weight, r.function_timeout_s) for f in r.functions]
    if r.reward_model.path:
        from flywheel.rewards.reward_model import RewardModel

        rm = r.reward_model
        model = ray.remote(RewardModel).options(num_cpus=0).remote(rm.path, batch_size=rm.batch_size, max_length=rm.max_length, threads=1)
        scorers.append(reward_model_scorer(model.score.remote, rm.weight))
        actors.models.append(model)
    if r.judge.enabled and r.judge.engine != "endpoint":  # a vLLM engine in the run; it cannot constrain output
        engine, path = policy_engine, config.model.path
        if r.judge.engine == "own":
            path = r.judge.model_path
            judge_config = config.model_copy(
                update={"model": config.model.model_copy(update={"path": path}), "rollout": config.rollout.model_copy(update={"engines": 1})}
            )
            engine = EngineRouter(start_engines(judge_config, cpus=0), engine_starter(judge_config, cpus=0), config.rollout.max_engine_restarts)
            actors.judge_router = engine
        judge = Judge(EngineBackend(engine, path, max_tokens=r.judge.max_tokens, seed=config.run.seed), structured=False)
    return RewardPipeline.from_config(r, rubric=None, scorers=scorers, judge=judge, env_guards=env_guards), actors
