"""EngineRouter's choice of replica (least outstanding work, sticky keys, dead replicas skipped) and
its restarts (replacement loads the latest weights first; requests wait while all are dead; a bound)."""

import asyncio
import random
from dataclasses import dataclass

import pytest

from flywheel.engines.base import EngineDied, Loaded
from flywheel.rollout.router import EngineRouter, NoEngineLeft
from flywheel.weights.base import WeightsCorrupt, WeightUpdate


def set_loads(router: EngineRouter, loads: list[int]) -> None:
    """Requests in flight per replica, as begin and end leave them."""
    for index, load in enumerate(loads):
        while router.outstanding[index] < load:
            router.begin(index)
        while router.outstanding[index] > load:
            router.end(index)


def test_least_outstanding_then_lowest_index():
    router = EngineRouter(["a", "b", "c"])
    set_loads(router, [2, 1, 1])
    assert router.pick() == 1
    set_loads(router, [0, 1, 0])
    assert router.pick() == 0


def test_a_key_stays_on_its_replica_until_released_or_dead():
    router = EngineRouter(["a", "b"])
    set_loads(router, [1, 0])
    assert router.pick(key="episode-7") == 1
    set_loads(router, [0, 5])
    assert router.pick(key="episode-7") == 1  # its earlier turns are in replica 1's prefix cache
    router.release("episode-7")
    assert router.pick(key="episode-7") == 0
    router.mark_dead(0)
    assert router.pick(key="episode-7") == 1


def test_the_heap_pick_equals_a_scan_over_every_replica():
    rng = random.Random(0)
    router = EngineRouter(list(range(50)))
    for _ in range(20_000):
        index = rng.randrange(50)
        if rng.random() < 0.002 and router.live_count > 1:
            router.mark_dead(index)
        elif router.outstanding[index] > 0 and rng.random() < 0.5:
            router.end(index)
        else:
            router.begin(router.pick())
        live = [i for i, ok in enumerate(router.alive) if ok]
        assert router.pick() == min(live, key=lambda i: (router.outstanding[i], i))
    assert len(router._queue) <= 4 * 50 + 64 + 1  # stale entries do not pile up


def test_no_live_replica_is_one_clear_error():
    router = EngineRouter(["a"])
    router.mark_dead(0)
    with pytest.raises(NoEngineLeft, match="every engine replica has died"):
        router.pick()


class Replica:
    """An engine stand-in for the router's logic: records the versions it loads, dies on request."""

    def __init__(self, name: str, version: int = 0) -> None:
        self.name, self.version, self.dead, self.stopped = name, version, False, False
        self.dying = asyncio.Event()  # set: requests in flight fail with EngineDied

    async def generate(self, prompts, n, temperature, max_tokens, seed, stop=None, schema=None):
        if self.dead:
            raise EngineDied(self.name)
        await asyncio.wait([asyncio.ensure_future(self.dying.wait())], timeout=0.01)
        if self.dying.is_set():
            self.dead = True
            raise EngineDied(self.name)
        return [[(self.name, self.version, seed)]]

    async def load_weights(self, update):
        if self.dead:
            raise EngineDied(self.name)
        await asyncio.sleep(0.01)
        self.version = update.version
        return Loaded(0.0)

    def shutdown(self) -> None:
        self.dead = self.stopped = True


@dataclass(frozen=True)
class Version(WeightUpdate):
    def receive(self):
        return iter(())


def starter(made: list[Replica], fail_first: int = 0):
    async def start(slot: int = 0) -> Replica:
        await asyncio.sleep(0.05)  # a replacement takes a while to start
        if len(made) < fail_first:
            made.append(None)
            raise RuntimeError("engine init failed")
        made.append(Replica(f"new{len(made)}"))
        return made[-1]

    return start


def test_a_dead_replica_is_replaced_with_the_latest_weights_and_its_request_resubmitted():
    async def run():
        a, b, made = Replica("a"), Replica("b"), []
        router = EngineRouter([a, b], starter(made), max_restarts=2)
        await router.load_weights(Version(4))
        set_loads(router, [0, 1])  # the request goes to a
        request = asyncio.create_task(router.generate([[1]], 1, 1.0, 4, seed=7))
        await asyncio.sleep(0)
        a.dying.set()
        assert await request == [[("b", 4, 7)]]  # resubmitted to b, same seed
        assert (router.live_count, router.restarts, router.resubmitted) == (1, 1, 1)
        await router.load_weights(Version(5))  # published while the replacement starts
        while router.live_count < 2:
            await asyncio.sleep(0.01)
        assert router.engines[0] is made[0] and made[0].version == 5
        assert a.stopped  # what was left of it was shut down
        await router.close()
        assert made[0].stopped and not b.stopped  # the router stops the replacements it started

    asyncio.run(run())


def test_requests_wait_for_a_restart_while_every_replica_is_dead():
    async def run():
        a, made = Replica("a"), []
        router = EngineRouter([a], starter(made, fail_first=1), max_restarts=2)
        await router.load_weights(Version(3))
        a.dying.set()
        assert await router.generate([[1]], 1, 1.0, 4, seed=0) == [[("new1", 3, 0)]]  # the first restart failed, the second served
        assert router.restarts == 2 and made[0] is None
        # the two starts (0.05 s each) and the wait between them, with no live replica: the run's downtime
        assert 0.1 <= router.downtime_s() < 1.0
        held = router.downtime_s()
        await asyncio.sleep(0.05)
        assert router.downtime_s() == held  # a replica is live again: the clock stopped

    asyncio.run(run())


def test_when_restarts_are_spent_a_dead_run_is_one_clear_error():
    async def run():
        a, b, made = Replica("a"), Replica("b"), []
        router = EngineRouter([a, b], starter(made), max_restarts=1)
        a.dying.set()
        b.dying.set()
        with pytest.raises(NoEngineLeft, match=r"the 1 restarts allowed by rollout.max_engine_restarts are spent"):
            while True:  # the replacement of a serves until it dies too
                await router.generate([[1]], 1, 1.0, 4, seed=0)
                made[0].dying.set()

    asyncio.run(run())


def test_closing_with_keep_serving_hands_the_serving_replacements_over():
    """A supervised run's attempt ends: the replacement in a slot keeps running (the next attempt's
    router gets it and the restart count), one replaced in turn was stopped once, a restart under way
    is cancelled and not counted."""

    async def run():
        a, b, c, made = Replica("a"), Replica("b"), Replica("c"), []
        router = EngineRouter([a, b, c], starter(made), max_restarts=3)
        a.dying.set()
        await router.generate([[1]], 1, 1.0, 4, seed=0)  # least work: a, which dies; resubmitted to b
        while router.live_count < 3:
            await asyncio.sleep(0.01)
        made[0].dying.set()  # the replacement dies too: replaced by a second one
        await router.generate([[1]], 1, 1.0, 4, seed=0)
        while router.live_count < 3:
            await asyncio.sleep(0.01)
        c.dying.set()
        set_loads(router, [1, 1, 0])
        await router.generate([[1]], 1, 1.0, 4, seed=0)  # c dies; its restart is under way at close
        assert router.restarts == 3
        await router.close(keep_serving=True)
        assert router.engines == [made[1], b, c] and router.restarts == 2
        assert made[0].stopped and not made[1].stopped and not b.stopped
        following = EngineRouter(router.engines, starter(made), max_restarts=3, restarts=router.restarts)
        following.mark_dead(2, c)  # the next attempt finds c dead: the run's one restart left
        following.mark_dead(1, b)
        assert following.restarts == 3 and following.live_count == 1  # b stays dead: the budget is the run's
        await following.close()

    asyncio.run(run())


class Garbled(Replica):
    """A replica whose first ``corrupt`` loads receive a corrupt copy (and stay unloaded)."""

    def __init__(self, name: str, corrupt: int) -> None:
        super().__init__(name)
        self.corrupt, self.loads = corrupt, []

    async def load_weights(self, update):
        self.loads.append(update.version)
        if len(self.loads) <= self.corrupt:
            raise WeightsCorrupt(
                f"engine replica {self.name}: weights version {update.version}: tensor w arrived with digest 00000001, the trainer published 0000000000000002"
            )
        return await super().load_weights(update)


def test_a_corrupt_copy_is_sent_once_more_to_its_replica_and_a_second_one_stops_the_run():
    async def run():
        lines = []
        a, b = Garbled("a", corrupt=0), Garbled("b", corrupt=1)
        router = EngineRouter([a, b], log=lines.append)
        await router.load_weights(Version(5))
        assert (a.loads, b.loads, a.version, b.version) == ([5], [5, 5], 5, 5)
        assert lines == [
            "engine replica b: weights version 5: tensor w arrived with digest 00000001, the trainer published 0000000000000002; sending weights version 5 again"
        ]

        router = EngineRouter([Garbled("a", corrupt=2)])
        with pytest.raises(
            WeightsCorrupt, match=r"engine replica a: weights version 6: tensor w arrived .*, again after it was re-sent; stopping the run"
        ):
            await router.load_weights(Version(6))
        assert router.engines[0].version == 0  # never loaded

    asyncio.run(run())


def test_with_a_collective_the_re_send_is_a_re_formed_group_of_every_live_replica():
    async def run():
        a, b, groups = Garbled("a", corrupt=1), Garbled("b", corrupt=0), []

        async def rejoin(replicas):
            groups.append(replicas)
            return Version(7)

        router = EngineRouter([a, b], rejoin=rejoin)
        await router.load_weights(Version(7))
        assert groups == [[0, 1]] and (a.loads, b.loads, a.version, b.version) == ([7, 7], [7, 7], 7, 7)

    asyncio.run(run())
