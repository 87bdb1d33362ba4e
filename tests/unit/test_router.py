"""EngineRouter's choice of replica: least outstanding work, sticky keys, dead replicas skipped."""

import pytest

from flywheel.rollout.router import EngineRouter, NoEngineLeft


def test_least_outstanding_then_lowest_index():
    router = EngineRouter(["a", "b", "c"])
    router.outstanding = [2, 1, 1]
    assert router.pick() == 1
    router.outstanding = [0, 1, 0]
    assert router.pick() == 0


def test_a_key_stays_on_its_replica_until_released_or_dead():
    router = EngineRouter(["a", "b"])
    router.outstanding = [1, 0]
    assert router.pick(key="episode-7") == 1
    router.outstanding = [0, 5]
    assert router.pick(key="episode-7") == 1  # its earlier turns are in replica 1's prefix cache
    router.release("episode-7")
    assert router.pick(key="episode-7") == 0
    router.mark_dead(0)
    assert router.pick(key="episode-7") == 1


def test_no_live_replica_is_one_clear_error():
    router = EngineRouter(["a"])
    router.mark_dead(0)
    with pytest.raises(NoEngineLeft, match="every engine replica has died"):
        router.pick()
