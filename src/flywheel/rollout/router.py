"""Engine replicas behind one router: least outstanding work first, sticky keys, failover.

A request goes to the live replica with the fewest requests in flight (ties: the lowest index). A
request with a ``key`` (a multi-turn episode) goes where that key went before, so the engine's
prefix cache serves its earlier turns. If a replica dies (its actor is gone), it is marked dead and
every request it held is resubmitted to another one: same arguments, same seed. When none is left,
``NoEngineLeft`` says so.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from ray.exceptions import RayActorError


class NoEngineLeft(RuntimeError):
    pass


class EngineRouter:
    def __init__(self, engines: list[ray.actor.ActorHandle]) -> None:
        self.engines = list(engines)
        self.outstanding = [0] * len(engines)
        self.alive = [True] * len(engines)
        self.sticky: dict[Any, int] = {}
        self.resubmitted = 0

    def pick(self, key: Any = None) -> int:
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

    def release(self, key: Any) -> None:
        """Forgets a finished episode's replica."""
        self.sticky.pop(key, None)

    async def generate(self, *args, key: Any = None, **kwargs):
        """engine.generate(*args, **kwargs) on a live replica; retried on another if it dies."""
        while True:
            index = self.pick(key)
            self.outstanding[index] += 1
            try:
                return await self.engines[index].generate.remote(*args, **kwargs)
            except RayActorError:
                self.mark_dead(index)
                self.resubmitted += 1
            finally:
                self.outstanding[index] -= 1

    def mark_dead(self, index: int) -> None:
        self.alive[index] = False
        self.sticky = {k: i for k, i in self.sticky.items() if i != index}

    async def load_weights(self, path: str, version: int) -> float:
        """Every live replica loads the weights (concurrently); returns the longest pause in seconds."""
        live = [i for i, ok in enumerate(self.alive) if ok]
        results = await asyncio.gather(*(self.engines[i].load_weights.remote(path, version) for i in live), return_exceptions=True)
        for i, result in zip(live, results):
            if isinstance(result, RayActorError):
                self.mark_dead(i)
            elif isinstance(result, BaseException):
                raise result
        if not any(self.alive):
            raise NoEngineLeft("every engine replica has died; the run cannot generate")
        return max((r for r in results if isinstance(r, float)), default=0.0)

    @property
    def live_count(self) -> int:
        return sum(self.alive)
