"""score_group: the shaped reward replaces an episode's only where it differs; a non-finite one marks it."""

import asyncio
import math

from flywheel.algorithms import make_algorithm
from flywheel.config import load_config
from flywheel.rollout.group import EnvEpisode
from flywheel.rollout.stream import score_group
from flywheel.types import Completion, Task


def episode(reward: float, error: str | None = None) -> EnvEpisode:
    completion = Completion([6, 7], [-0.5, -0.5], "67", weight_versions=(0, 0))
    return EnvEpisode([4, 5], completion, reward, error=error, turns=1, tool_calls=0, tool_errors=0, stop_reason="done", messages=())


def test_unchanged_rewards_keep_their_episode_and_others_are_replaced():
    grpo = make_algorithm(load_config(None, ["rollout.group_size=5"]).algorithm)  # shape_rewards: the rewards as float32
    episodes = [episode(1.0), episode(0.1), episode(math.inf), episode(-0.0), episode(0.0, error="env_error")]
    scored, metrics, notes = asyncio.run(score_group(episodes, Task("1+1=", "2"), grpo, None, 8))
    assert [s is e for s, e in zip(scored, episodes)] == [True, False, False, True, True]
    assert scored[1].reward == 0.10000000149011612 and scored[1].error is None  # 0.1 through float32
    assert scored[2].reward == math.inf and scored[2].error == "nonfinite_reward"
    assert math.copysign(1.0, scored[3].reward) == -1.0 and scored[4].error == "env_error"
    assert metrics == {} and [n["sub_rewards"] for n in notes] == [{"env": r} for r in (1.0, 0.1, math.inf, -0.0, 0.0)]
