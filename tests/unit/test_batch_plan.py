"""BatchPlan: which finished groups a step trains on, exactly, one arrival at a time."""

import pytest

from flywheel.rollout.group import EnvEpisode
from flywheel.rollout.stream import BatchPlan, Group
from flywheel.types import Completion


def group(position: int, rewards: list[float], version: int = 5, errors: tuple[str | None, ...] = ()) -> Group:
    errors = errors or (None,) * len(rewards)
    episodes = [
        EnvEpisode(
            [1],
            Completion([5, 6], [-0.1, -0.1], "", (version, version)),
            r,
            error=e,
            turns=1,
            tool_calls=0,
            tool_errors=0,
            stop_reason="done",
            messages=(),
        )
        for r, e in zip(rewards, errors)
    ]
    return Group(position, episodes)


def informative(rewards: list[float]) -> bool:
    return len(set(rewards)) > 1


def plan(wanted: int = 2, rounds: int = 1, keep=lambda rewards: True) -> BatchPlan:
    # trainer version 5, max_staleness 0: tokens of version 5 are fresh, older ones stale
    return BatchPlan(wanted, rounds, trainer_version=5, max_staleness=0, min_valid=2, keep_group=keep)


def test_stale_and_invalid_groups_are_replaced_and_the_rest_sorted_by_position():
    p = plan()
    fates = [
        p.offer(group(7, [1, 0])),
        p.offer(group(2, [1, 0], version=4)),  # oldest token 5 - 4 = 1 version behind > 0
        p.offer(group(4, [1, 0, 1], errors=("env_error", "env_timeout", None))),  # 1 valid < min_valid 2
        p.offer(group(3, [0, 1, 1], errors=("env_error", None, None))),  # 2 valid: trained
    ]
    assert fates == ["trained", "stale", "invalid", "trained"] and p.complete
    kept, dropped = p.result()
    assert [g.position for g in kept] == [3, 7] and dropped == []
    assert (p.stale, p.invalid, p.episodes) == (1, 1, 10)
    assert dict(p.errors) == {"env_error": 2, "env_timeout": 1}


def test_dynamic_sampling_judges_valid_rewards_only():
    p = plan(wanted=1, rounds=3, keep=informative)
    # rewards [1, 1] once the invalid episode is left out: uninformative, though nan != 1
    assert p.offer(group(0, [1, 1, float("nan")])) == "uninformative"
    assert dict(p.errors) == {"nonfinite_reward": 1}
    assert p.offer(group(1, [1, 0])) == "trained" and p.complete


def test_uninformative_groups_end_the_step_after_the_rounds_and_the_last_ones_are_trained():
    p = plan(wanted=2, rounds=2, keep=informative)
    for position in range(3):
        assert p.offer(group(position, [1, 1])) == "uninformative"
        assert not p.complete
    p.offer(group(3, [0, 0]))
    assert p.complete  # 2 * 2 groups examined, none kept
    kept, dropped = p.result()
    assert [g.position for g in kept] == [2, 3] and [g.position for g in dropped] == [0, 1]


def test_stale_and_invalid_groups_do_not_use_up_the_rounds():
    p = plan(wanted=1, rounds=1, keep=informative)
    for position in range(5):
        p.offer(group(position, [1, 0], version=0))
        p.offer(group(10 + position, [1, 0], errors=("env_error", "env_error")))
    assert not p.complete and (p.stale, p.invalid) == (5, 5)


def test_a_dead_admission_task_is_raised_to_the_consumer_not_left_to_hang():
    import asyncio
    from types import SimpleNamespace

    from flywheel.algorithms import make_algorithm
    from flywheel.config import load_config
    from flywheel.rollout.stream import RolloutStream

    class Broken(RolloutStream):
        def room(self) -> int:  # a bug in the admission loop
            raise RuntimeError("admission broke")

    async def consume() -> None:
        config, router = load_config(None), SimpleNamespace(downtime_s=lambda: 0.0)
        stream = Broken(router, None, None, config, {"accepted": 0, "next_position": 0, "pending": []}, make_algorithm(config.algorithm), None)
        stream.start()
        await asyncio.wait_for(stream.next_group(), timeout=5)

    with pytest.raises(RuntimeError, match="admission broke"):
        asyncio.run(consume())
