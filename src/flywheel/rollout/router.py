"""Engine replicas behind one router: least outstanding work first, sticky keys, failover, restarts.

A request goes to the live replica with the fewest requests in flight (ties: the lowest index), found
in O(log R) from a heap of (load, index) entries: every change of a load pushes the new entry, and a
pick drops the stale entries it finds on top (a dead replica's, or an old load's). A
request with a ``key`` (a multi-turn episode) goes where that key went before, so the engine's
prefix cache serves its earlier turns. If a replica dies (``EngineDied``), it is marked dead and
every request it held is resubmitted to another one: same arguments, same seed.

Restarts: given a ``restart`` factory, the router replaces a dead replica in the background while
the live ones keep generating. The replacement first loads the latest weights the router was given
(``load_weights`` keeps the last update), again if a newer one arrived meanwhile, and only then takes
requests in the dead one's slot. At most ``max_restarts`` replacements are started in a run (a
replacement that fails to start counts too). While every replica is dead and a restart is under way,
requests wait for it; when none is live and none can come back, ``NoEngineLeft`` says so. The router
is itself an ``Engine``, and ``pinned(key)`` is one whose requests all carry ``key``.

A transport whose updates a newcomer cannot receive later (the collective one: a broadcast reaches
the members of its group as it happens) gives the router ``rejoin``: the latest version re-sent to a
re-formed group of the given replica slots. A replacement is then started in its dead slot, and
instead of loading the last update alone it joins a re-formed group of the live replicas plus itself
(``_reform``), which all load the re-sent version before it takes requests (then any newer update,
as above). A load that fails without a replica dying into it is an error as before; one that fails
with a death (a member died mid-send) re-forms the group without the dead replica (and with any
replacement ready to join) and loads the re-sent version, so no send waits for a dead member.
Re-forms run one at a time, and never while other loads are in flight on the same replicas.

A replica whose copy is refused (``WeightsCorrupt``: a tensor whose digest is not the trainer's, or a
probe gap over its tolerance) stays paused; the router sends the version once more (re-reading the
file, or a re-formed group's re-send), and a second refusal stops the run in one sentence naming the
replica and the tensor and digests, or the probe token and its gap.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from flywheel.engines.base import Engine, EngineDied, Loaded
from flywheel.types import Completion
from flywheel.weights.base import WeightsCorrupt, WeightUpdate

EngineFactory = Callable[[int], Awaitable[Engine]]  # starts a replica for the given slot
Rejoin = Callable[[list[int]], Awaitable[WeightUpdate | None]]  # the latest version, re-sent to a group of these slots


class NoEngineLeft(RuntimeError):
    pass


class EngineRouter:
    def __init__(
        self,
        engines: list[Engine],
        restart: EngineFactory | None = None,
        max_restarts: int = 0,
        log: Callable[[str], None] = lambda _: None,
        restarts: int = 0,
        rejoin: Rejoin | None = None,
    ) -> None:
        """``restarts``: replacements already started in this run (by an earlier router: a supervised
        run's previous attempt); they count against ``max_restarts``."""
        self.engines = list(engines)
        self.outstanding = [0] * len(engines)  # requests in flight per replica: changed by begin and end only
        self.alive = [True] * len(engines)
        self._queue = [(0, i) for i in range(len(engines))]  # a heap of (load, index); stale entries dropped when met
        self.sticky: dict[Hashable, int] = {}
        self.resubmitted = 0
        self.restarts = restarts  # replacements started
        self.latest: WeightUpdate | None = None  # the last update given to load_weights
        self._restart, self._max_restarts, self.log = restart, max_restarts, log  # log: one line per restart event
        self._restarting: dict[int, asyncio.Task] = {}
        self._made: list[Engine] = []  # replacements this router started (and stops)
        self._changed = asyncio.Event()  # set when a replica comes back or a restart ends
        self.rejoin = rejoin
        self._joining: dict[int, Engine] = {}  # replacements waiting for the next re-formed group
        self._reforming = asyncio.Lock()
        self._reforms = 0  # re-forms done
        self._loads: asyncio.Future | None = None  # load_weights' loads in flight
        self._background: set[asyncio.Task] = set()  # re-forms after a death
        self._deaths = self._deaths_covered = 0  # replicas marked dead; of those, the ones the weight group has left out
        self._downtime, self._down_since = 0.0, None  # seconds with no live replica, ended and under way

    def pick(self, key: Hashable | None = None) -> int:
        """Index of the replica for a new request."""
        if key is not None and key in self.sticky and self.alive[self.sticky[key]]:
            return self.sticky[key]
        queue = self._queue
        while queue and not (self.alive[queue[0][1]] and self.outstanding[queue[0][1]] == queue[0][0]):
            heapq.heappop(queue)
        if not queue:
            raise NoEngineLeft(self._none_left())
        index = queue[0][1]
        if key is not None:
            self.sticky[key] = index
        return index

    def begin(self, index: int) -> None:
        """A request starts on replica ``index``."""
        self._load(index, self.outstanding[index] + 1)

    def end(self, index: int) -> None:
        """A request on replica ``index`` ended (answered or failed)."""
        self._load(index, self.outstanding[index] - 1)

    def _load(self, index: int, load: int) -> None:
        self.outstanding[index] = load
        if len(self._queue) > 4 * len(self.engines) + 64:  # stale entries below the top: start afresh
            self._queue = [(n, i) for i, (n, ok) in enumerate(zip(self.outstanding, self.alive)) if ok]
            heapq.heapify(self._queue)
        elif self.alive[index]:
            heapq.heappush(self._queue, (load, index))

    def _none_left(self) -> str:
        if self._restart is None:
            return "every engine replica has died; the run cannot generate"
        return f"every engine replica has died and the {self._max_restarts} restarts allowed by rollout.max_engine_restarts are spent; the run cannot generate"

    async def replica(self, key: Hashable | None = None) -> int:
        """``pick``, waiting while no replica is live but one is restarting."""
        while not any(self.alive) and self._restarting:
            self._changed.clear()
            await self._changed.wait()
        return self.pick(key)

    def release(self, key: Hashable) -> None:
        """Forgets a finished episode's replica."""
        self.sticky.pop(key, None)

    def pinned(self, key: Hashable) -> Pinned:
        """This router as an Engine whose requests all go to ``key``'s replica (until it is released)."""
        return Pinned(self, key)

    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
        *,
        key: Hashable | None = None,
    ) -> list[list[Completion]]:
        """``Engine.generate`` on a live replica (``key``'s, if it has one); retried on another if it dies."""
        while True:
            index = await self.replica(key)
            engine = self.engines[index]
            self.begin(index)
            try:
                return await engine.generate(prompts, n, temperature, max_tokens, seed, stop, schema)
            except EngineDied:
                self.mark_dead(index, engine)
                self.resubmitted += 1
            finally:
                self.end(index)

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        """``Engine.score`` on a live replica; retried on another (or the restarted one) if it dies."""
        while True:
            index = await self.replica()
            engine = self.engines[index]
            self.begin(index)
            try:
                return await engine.score(sequences)
            except EngineDied:
                self.mark_dead(index, engine)
                self.resubmitted += 1
            finally:
                self.end(index)

    def mark_dead(self, index: int, engine: Engine | None = None) -> None:
        """Takes replica ``index`` out of rotation and, restarts allowing, starts its replacement.
        ``engine``: the replica that failed (a late failure of one already replaced is ignored)."""
        if engine is not None and engine is not self.engines[index]:
            return
        was_alive, self.alive[index] = self.alive[index], False
        self._deaths += was_alive
        if was_alive and not any(self.alive):
            self._down_since = time.monotonic()
        if was_alive and self.rejoin is not None:  # the group leaves the dead replica out before any send waits on it
            self._background.add(asyncio.create_task(self._reform_after_death(self._reforms), name=f"reform-without-{index}"))
        self.sticky = {k: i for k, i in self.sticky.items() if i != index}
        if was_alive and self._restart is not None:
            self._begin_restart(index)

    def _begin_restart(self, index: int) -> None:
        if self.restarts >= self._max_restarts:
            self.log(f"engine replica {index} died; no restart left (rollout.max_engine_restarts = {self._max_restarts})")
            self._changed.set()
            return
        self.restarts += 1
        version = self.latest.version if self.latest else 0
        self.log(f"engine replica {index} died at weights version {version}; restarting it ({self.restarts} of {self._max_restarts} restarts)")
        self._restarting[index] = asyncio.create_task(self._replace(index), name=f"restart-engine-{index}")

    async def _replace(self, index: int) -> None:
        """Starts a replacement, loads the latest weights into it, puts it in replica ``index``'s slot."""
        dead = self.engines[index]
        engine: Engine | None = None
        try:
            await asyncio.to_thread(dead.shutdown)  # whatever is left of it
            if dead in self._made:  # a replacement replaced: stopped here, not again at close
                self._made.remove(dead)
            engine = await self._restart(index)
            self._made.append(engine)
            loaded = await self._join(index, engine) if self.rejoin is not None else None
            while self.latest is not None and self.latest is not loaded:
                update = self.latest
                try:
                    await engine.load_weights(update)
                except EngineDied:
                    raise
                except Exception:
                    if update is self.latest:
                        raise
                    continue  # superseded while loading (its transport may have dropped it): load the newer one
                loaded = update
        except asyncio.CancelledError:
            raise
        except Exception as error:
            del self._restarting[index]
            self.log(f"engine replica {index} failed to restart: {type(error).__name__}: {error}")
            self.engines[index] = engine or dead
            self._begin_restart(index)  # counts against the same budget
            return
        del self._restarting[index]
        self.engines[index], self.alive[index] = engine, True
        heapq.heappush(self._queue, (self.outstanding[index], index))
        if self._down_since is not None:
            self._downtime, self._down_since = self._downtime + time.monotonic() - self._down_since, None
        self.log(f"engine replica {index} is back, serving weights version {self.latest.version if self.latest else 0}")
        self._changed.set()

    async def _join(self, index: int, engine: Engine) -> WeightUpdate | None:
        """Replacement ``engine`` of slot ``index`` joins a re-formed group; returns the update it loaded."""
        self._joining[index] = engine
        try:
            update = await self._reform()
            if self._joining.get(index) is not engine:
                raise EngineDied(f"the replacement of engine replica {index} died while joining the weight group")
            return update
        finally:
            self._joining.pop(index, None)

    async def _reform(self, after: int | None = None) -> WeightUpdate | None:
        """Re-forms the weight group with the live replicas and those joining, and loads the re-sent
        latest version into all of them; again while members die into it. ``after``: the re-form count
        the caller saw; a re-form done since then that left out every dead replica is enough."""
        async with self._reforming:
            while after is None or after == self._reforms or self._deaths_covered < self._deaths:
                after = None
                live, deaths = [i for i, ok in enumerate(self.alive) if ok], self._deaths
                members = {i: self.engines[i] for i in live} | self._joining
                if not members:
                    return None
                update = await self.rejoin(sorted(members))  # abandons the old group's send: its loads fail now
                if update is None:
                    return None
                if self._loads is not None:  # let the loads in flight end first (one update at a time per replica)
                    await asyncio.wait([self._loads])
                if self.latest is None or self.latest.version <= update.version:
                    self.latest = update
                results = await asyncio.gather(*(e.load_weights(update) for e in members.values()), return_exceptions=True)
                died = [(i, e) for (i, e), r in zip(members.items(), results) if isinstance(r, EngineDied)]
                for i, engine in died:
                    if self._joining.get(i) is engine:
                        del self._joining[i]
                    else:
                        self.mark_dead(i, engine)
                failed = [r for r in results if isinstance(r, BaseException) and not isinstance(r, EngineDied)]
                if failed and not died:
                    raise failed[0]
                if not died:
                    self._reforms, self._deaths_covered = self._reforms + 1, deaths
                    self.log(f"weight group re-formed with engine replicas {sorted(members)} at weights version {update.version}")
                    return update
        return self.latest

    async def _reform_after_death(self, reforms: int) -> None:
        try:
            await self._reform(after=reforms)
        except Exception as error:  # the next load reports what is still wrong
            self.log(f"re-forming the weight group failed: {type(error).__name__}: {error}")
        finally:
            self._background.discard(asyncio.current_task())

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        """Every live replica loads the weights (concurrently); returns the longest pause in seconds
        and the largest probe gap.
        Replicas restarting load them (or a later update) before they take requests. With ``rejoin``,
        a load that a replica's death failed re-forms the group and loads the update again."""
        self.latest = update
        if self.rejoin is not None:
            async with self._reforming:  # a re-form under way ends first
                pass
            if self.latest is not update and self.latest.version >= update.version:
                return Loaded(0.0)  # a re-form re-sent it (or a newer one) meanwhile
        reforms, deaths = self._reforms, self._deaths_covered
        live = [i for i, ok in enumerate(self.alive) if ok]
        engines = [self.engines[i] for i in live]
        self._loads = asyncio.gather(*(engine.load_weights(update) for engine in engines), return_exceptions=True)
        try:
            results = await self._loads
        finally:
            self._loads = None
        failed = [r for r in results if isinstance(r, BaseException) and not isinstance(r, EngineDied)]
        died = [(i, engine) for i, engine, result in zip(live, engines, results) if isinstance(result, EngineDied)]
        for i, engine in died:
            self.mark_dead(i, engine)
        corrupt = [(i, r) for i, r in zip(live, results) if isinstance(r, WeightsCorrupt)]
        if corrupt:
            await self._resend(update, corrupt)
        elif failed and (self.rejoin is None or self._deaths == deaths):  # no member died since the group formed
            raise failed[0]
        elif self.rejoin is not None and failed:
            await self._reform(after=reforms)
        if not any(self.alive) and not self._restarting:
            raise NoEngineLeft(self._none_left())
        loaded = [r for r in results if isinstance(r, Loaded)]
        gaps = [r.probe_gap for r in loaded if r.probe_gap is not None]
        return Loaded(max((r.pause_s for r in loaded), default=0.0), max(gaps, default=None))

    async def _resend(self, update: WeightUpdate, corrupt: list[tuple[int, WeightsCorrupt]]) -> None:
        """Sends ``update`` once more to the replicas that refused their copy (they stay paused meanwhile),
        with ``rejoin`` to a re-formed group of every live replica; a second refusal raises
        ``WeightsCorrupt`` in one sentence."""
        self.log(f"{corrupt[0][1].sentence}; sending weights version {update.version} again")
        try:
            if self.rejoin is not None:
                await self._reform()
                return
            replicas = [i for i, _ in corrupt if self.alive[i]]
            results = await asyncio.gather(*(self.engines[i].load_weights(update) for i in replicas), return_exceptions=True)
            for i, result in zip(replicas, results):
                if isinstance(result, EngineDied):
                    self.mark_dead(i, self.engines[i])
                elif isinstance(result, BaseException):
                    raise result
        except WeightsCorrupt as again:
            raise WeightsCorrupt(
                f"{again.sentence}, again after it was re-sent; stopping the run before any token is sampled from or trained on "
                "these weights: check the weight transport (weights:), the engine's logs and the memory of the trainer's and this engine's hosts"
            ) from None

    async def close(self, keep_serving: bool = False) -> None:
        """Cancels restarts and re-forms under way (a cancelled restart is no longer counted in
        ``restarts``: its slot keeps the dead replica) and stops the replacements this router started
        (the engines it was given belong to the caller). ``keep_serving``: replacements now in a slot of
        ``engines`` are left running and become the caller's (a supervised run hands them to its next attempt)."""
        restarting = list(self._restarting.values())
        pending = [*restarting, *self._background]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self.restarts -= len(restarting)
        for engine in self._made:
            if not (keep_serving and any(engine is e for e in self.engines)):
                await asyncio.to_thread(engine.shutdown)

    def shutdown(self) -> None:
        """Stops every replica."""
        for engine in self.engines:
            engine.shutdown()

    def downtime_s(self) -> float:
        """Seconds so far with no live replica (every one dead, a replacement starting): requests waited
        rather than ran, and an episode's time limit does not count them (``rollout.group``)."""
        return self._downtime + (time.monotonic() - self._down_since if self._down_since is not None else 0.0)

    @property
    def live_count(self) -> int:
        return sum(self.alive)


@dataclass(frozen=True)
class Pinned:
    """The router's replicas as one Engine, every request sent with ``key`` (see ``EngineRouter.pick``)."""

    router: EngineRouter
    key: Hashable

    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
    ) -> list[list[Completion]]:
        return await self.router.generate(prompts, n, temperature, max_tokens, seed, stop, schema, key=self.key)

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        return await self.router.load_weights(update)

    def shutdown(self) -> None:
        self.router.shutdown()
