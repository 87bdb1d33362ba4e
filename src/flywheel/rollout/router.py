"""Engine replicas behind one router: least outstanding work first, sticky keys, failover.

A request goes to the live replica with the fewest requests in flight (ties: the lowest index). A
request with a ``key`` (a multi-turn episode) goes where that key went before, so the engine's
prefix cache serves its earlier turns. If a replica dies (``EngineDied``), it is marked dead and
every request it held is resubmitted to another one: same arguments, same seed. When none is left,
``NoEngineLeft`` says so. The router is itself an ``Engine``, and ``pinned(key)`` is one whose
requests all carry ``key``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass

from flywheel.engines.base import Engine, EngineDied
from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate


class NoEngineLeft(RuntimeError):
    pass


class EngineRouter:
    def __init__(self, engines: list[Engine]) -> None:
        self.engines = list(engines)
        self.outstanding = [0] * len(engines)
        self.alive = [True] * len(engines)
        self.sticky: dict[Hashable, int] = {}
        self.resubmitted = 0

    def pick(self, key: Hashable | None = None) -> int:
        """Index of the replica for a new request."""
        if key is not None and key in self.sticky and self.alive[self.sticky[key]]:
            return self.sticky[key]
        live = [i for i, ok in enumerate(self.alive) if ok]
        if not live:
            raise NoEngineLeft("every engine replica has died; the run cannot generate")
        index = min(live, key=lambda i: (self.outstanding[i], i))
        if key is not None:
            self.sticky[key] = index
        return index

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
            index = self.pick(key)
            self.outstanding[index] += 1
            try:
                return await self.engines[index].generate(prompts, n, temperature, max_tokens, seed, stop)
            except EngineDied:
                self.mark_dead(index)
                self.resubmitted += 1
            finally:
                self.outstanding[index] -= 1

    def mark_dead(self, index: int) -> None:
        self.alive[index] = False
        self.sticky = {k: i for k, i in self.sticky.items() if i != index}

    async def load_weights(self, update: WeightUpdate) -> float:
        """Every live replica loads the weights (concurrently); returns the longest pause in seconds."""
        live = [i for i, ok in enumerate(self.alive) if ok]
        results = await asyncio.gather(*(self.engines[i].load_weights(update) for i in live), return_exceptions=True)
        for i, result in zip(live, results):
            if isinstance(result, EngineDied):
                self.mark_dead(i)
            elif isinstance(result, BaseException):
                raise result
        if not any(self.alive):
            raise NoEngineLeft("every engine replica has died; the run cannot generate")
        return max((r for r in results if isinstance(r, float)), default=0.0)

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
