"""A judge on the policy's engines calls them through the run's router, and a judge on an engine of
its own (`reward.judge.engine=own`) through a router of its own: after the replica it used dies and
the router replaces it, the next judge call is answered by the replacement (the same model, so the
same greedy reply) instead of raising EngineDied."""

import asyncio
from pathlib import Path

import pytest
import ray
from helpers import SYNC, dies_within
from tiny_models import save_causal_lm

from flywheel.cluster.workers import engine_group, engine_starter, run_spec, start_reward_actors
from flywheel.config import load_config
from flywheel.rewards.judge import EngineBackend, build_prompt
from flywheel.rewards.wiring import reward_pipeline
from flywheel.rollout.router import EngineRouter

REPO = Path(__file__).resolve().parents[2]
JUDGE = ["reward.judge.enabled=true", "reward.judge.engine=policy", "reward.judge.max_tokens=8"]


@pytest.mark.slow
def test_the_policy_judge_is_answered_by_the_replacement_replica(shared_engine, tmp_path):
    """shared_engine: Ray is up. The policy is a tiny random ASCII model with a chat template and
    room for the judge's prompt (the tiny adder's context is 64 tokens)."""
    model = save_causal_lm(tmp_path / "policy")
    judge_config = load_config(REPO / "configs/quickstart.yaml", [*SYNC, "run.progress=false", f"model.path={model}", *JUDGE])
    start = engine_starter(engine_group(judge_config, cpus=0.5))
    completions, tasks = ["46", "13"], [{"prompt": "12+34=", "answer": "46", "reward": 1.0}, {"prompt": "5+7=", "answer": "12", "reward": 0.0}]
    request = [build_prompt("12+34=", "46", "46", nonce="c" * 16)]

    async def run():
        first = await start()
        router = EngineRouter([first], start, max_restarts=1)
        pipeline = reward_pipeline(judge_config, (), router)
        backend = EngineBackend(router, judge_config.model.path, max_tokens=8)
        try:
            before = await pipeline.score(completions, tasks)
            [reply_before] = await backend.complete_batch(request, None)
            ray.kill(first.actor, no_restart=True)
            after = await asyncio.wait_for(pipeline.score(completions, tasks), timeout=600)
            [reply_after] = await backend.complete_batch(request, None)
            return router, first, before, after, reply_before, reply_after
        finally:
            await router.close()

    router, first, before, after, reply_before, reply_after = asyncio.run(run())
    assert (router.restarts, router.resubmitted, router.live_count) == (1, 1, 1)  # the judge's request moved to the replacement
    assert router.engines[0] is not first and router.engines[0].actor != first.actor
    assert after.rewards == before.rewards and after.metrics["reward/judge/mean"] == before.metrics["reward/judge/mean"]
    assert after.metrics["judge/parse_fail_rate"] == before.metrics["judge/parse_fail_rate"]
    assert reply_after.text == reply_before.text and reply_after.text  # the same tiny model, greedy


@pytest.mark.slow
def test_a_judge_on_its_own_engine_is_answered_by_its_restarted_engine(shared_engine, tmp_path):
    """engine: own. The judge's engine is killed between two scorings of the same completions: its
    router starts a replacement serving the judge's model, and the score and the judge's metrics are
    unchanged. Stopping the reward actors stops the replacement too."""
    judge_model = save_causal_lm(tmp_path / "judge")
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.progress=false",
            "reward.judge.enabled=true",
            "reward.judge.engine=own",
            f"reward.judge.model_path={judge_model}",
            "reward.judge.max_tokens=8",
        ],
    )
    completions, tasks = ["46", "13"], [{"prompt": "12+34=", "answer": "46", "reward": 1.0}, {"prompt": "5+7=", "answer": "12", "reward": 0.0}]

    async def run():
        actors = start_reward_actors(run_spec(config))  # the judge's own engine, behind its own router
        pipeline, router = reward_pipeline(config, (), shared_engine, actors.judge), actors.judge
        first = router.engines[0]
        try:
            before = await pipeline.score(completions, tasks)
            ray.kill(first.actor, no_restart=True)
            after = await asyncio.wait_for(pipeline.score(completions, tasks), timeout=600)
            replacement = router.engines[0]
        finally:
            await actors.stop()
        return router, first, replacement, before, after

    router, first, replacement, before, after = asyncio.run(run())
    assert (router.restarts, router.resubmitted, router.live_count) == (1, 1, 1)
    assert replacement.actor != first.actor
    assert after.rewards == before.rewards and after.metrics["reward/judge/mean"] == before.metrics["reward/judge/mean"]
    assert after.metrics["judge/parse_fail_rate"] == before.metrics["judge/parse_fail_rate"]
    assert dies_within(replacement.actor, 60)  # stopped with the pipeline
