"""Engine replicas behind one router: least outstanding work first, sticky keys, failover, restarts.

A request goes to the live replica with the fewest requests in flight (ties: the lowest index). A
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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from flywheel.engines.base import Engine, EngineDied
from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate

EngineFactory = Callable[[], Awaitable[Engine]]


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
    ) -> None:
        """``restarts``: replacements already started in this run (by an earlier router: a supervised
        run's previous attempt); they count against ``max_restarts``."""
        self.engines = list(engines)
        self.outstanding = [0] * len(engines)
        self.alive = [True] * len(engines)
        self.sticky: dict[Hashable, int] = {}
        self.resubmitted = 0
        self.restarts = restarts  # replacements started
        self.latest: WeightUpdate | None = None  # the last update given to load_weights
        self._restart, self._max_restarts, self.log = restart, max_restarts, log  # log: one line per restart event
        self._restarting: dict[int, asyncio.Task] = {}
        self._made: list[Engine] = []  # replacements this router started (and stops)
        self._changed = asyncio.Event()  # set when a replica comes back or a restart ends

    def pick(self, key: Hashable | None = None) -> int:
        """Index of the replica for a new request."""
        if key is not None and key in self.sticky and self.alive[self.sticky[key]]:
            return self.sticky[key]
        live = [i for i, ok in enumerate(self.alive) if ok]
        if not live:
            raise NoEngineLeft(self._none_left())
        index = min(live, key=lambda i: (self.outstanding[i], i))
        if key is not None:
            self.sticky[key] = index
        return index

    def _none_left(self) -> str:
        if self._restart is None:
            return "every engine replica has died; the run cannot generate"
        return f"every engine replica has died and the {self._max_restarts} restarts allowed by rollout.max_engine_restarts are spent; the run cannot generate"

    async def _pick_or_wait(self, key: Hashable | None) -> int:
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
        *,
        key: Hashable | None = None,
    ) -> list[list[Completion]]:
        """``Engine.generate`` on a live replica (``key``'s, if it has one); retried on another if it dies."""
        while True:
            index = await self._pick_or_wait(key)
            engine = self.engines[index]
            self.outstanding[index] += 1
            try:
                return await engine.generate(prompts, n, temperature, max_tokens, seed, stop)
            except EngineDied:
                self.mark_dead(index, engine)
                self.resubmitted += 1
            finally:
                self.outstanding[index] -= 1

    def mark_dead(self, index: int, engine: Engine | None = None) -> None:
        """Takes replica ``index`` out of rotation and, restarts allowing, starts its replacement.
        ``engine``: the replica that failed (a late failure of one already replaced is ignored)."""
        if engine is not None and engine is not self.engines[index]:
            return
        was_alive, self.alive[index] = self.alive[index], False
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
            engine = await self._restart()
            self._made.append(engine)
            while self.latest is not None:
                update = self.latest
                try:
                    await engine.load_weights(update)
                except EngineDied:
                    raise
                except Exception:
                    if update is self.latest:
                        raise
                    continue  # superseded while loading (its transport may have dropped it): load the newer one
                if update is self.latest:
                    break
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
        self.log(f"engine replica {index} is back, serving weights version {self.latest.version if self.latest else 0}")
        self._changed.set()

    async def load_weights(self, update: WeightUpdate) -> float:
        """Every live replica loads the weights (concurrently); returns the longest pause in seconds.
        Replicas restarting load them (or a later update) before they take requests."""
        self.latest = update
        live = [i for i, ok in enumerate(self.alive) if ok]
        engines = [self.engines[i] for i in live]
        results = await asyncio.gather(*(engine.load_weights(update) for engine in engines), return_exceptions=True)
        for i, engine, result in zip(live, engines, results):
            if isinstance(result, EngineDied):
                self.mark_dead(i, engine)
            elif isinstance(result, BaseException):
                raise result
        if not any(self.alive) and not self._restarting:
            raise NoEngineLeft(self._none_left())
        return max((r for r in results if isinstance(r, float)), default=0.0)

    async def close(self, keep_serving: bool = False) -> None:
        """Cancels restarts under way (no longer counted in ``restarts``: their slot keeps the dead
        replica) and stops the replacements this router started (the engines it was given belong to
        the caller). ``keep_serving``: replacements now in a slot of ``engines`` are left running and
        become the caller's (a supervised run hands them to its next attempt)."""
        restarting = list(self._restarting.values())
        for task in restarting:
            task.cancel()
        await asyncio.gather(*restarting, return_exceptions=True)
        self.restarts -= len(restarting)
        for engine in self._made:
            if not (keep_serving and any(engine is e for e in self.engines)):
                await asyncio.to_thread(engine.shutdown)

    def shutdown(self) -> None:
        """Stops every replica."""
        for engine in self.engines:
            engine.shutdown()

    @property
    def live_count(self) -> int:
        return sum(self.alive)


@dataclass(frozen=True)
class Pinned:
    """The router's replicas as one Engine, every request sent with ``key`` (see ``EngineRouter.pick``)."""

    router: EngineRouter
    key: Hashable

    async def generate(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None = None
    ) -> list[list[Completion]]:
        return await self.router.generate(prompts, n, temperature, max_tokens, seed, stop, key=self.key)

    async def load_weights(self, update: WeightUpdate) -> float:
        return await self.router.load_weights(update)

    def shutdown(self) -> None:
        self.router.shutdown()
