"""Engines as the timeline sees them: each replica's generate and weight-load spans.

``TimedEngine`` wraps one replica behind the router: a span per ``generate`` request (a group's
turn), per ``load_weights`` and, within it, the ``pause`` the engine reported (its end taken as the
load's end). Its actor name is ``engine-<i>``, i its slot in the router (a restarted replica takes
the dead one's slot and name).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from flywheel.engines.base import Engine, Loaded
from flywheel.rollout.router import EngineFactory, EngineRouter, Rejoin
from flywheel.timeline import Timeline
from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate


class TimedEngine:
    def __init__(self, engine: Engine, timeline: Timeline, name: Callable[[TimedEngine], str]) -> None:
        self.engine, self.timeline, self.name = engine, timeline, name

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
        with self.timeline.span(self.name(self), "generate"):
            return await self.engine.generate(prompts, n, temperature, max_tokens, seed, stop, schema)

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        with self.timeline.span(self.name(self), "score"):
            return await self.engine.score(sequences)

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        start = time.time()
        loaded = await self.engine.load_weights(update)
        end = time.time()
        self.timeline.add(self.name(self), "load_weights", start, end)
        self.timeline.add(self.name(self), "pause", max(start, end - loaded.pause_s), end)
        return loaded

    def shutdown(self) -> None:
        self.engine.shutdown()


def timed_router(
    engines: list[Engine], restart: EngineFactory | None, max_restarts: int, timeline: Timeline, restarts: int = 0, rejoin: Rejoin | None = None
) -> EngineRouter:
    """The router of ``engines``, each replica (restarted ones too) timed when the timeline records;
    ``restarts``: replacements an earlier attempt of the run started already."""
    if not timeline.enabled:
        return EngineRouter(engines, restart, max_restarts, restarts=restarts, rejoin=rejoin)

    def name(engine: TimedEngine) -> str:  # a replacement loading its first weights has no slot yet
        return f"engine-{next((i for i, e in enumerate(router.engines) if e is engine), 'restarting')}"

    async def timed_restart(replica: int) -> Engine:
        return TimedEngine(await restart(replica), timeline, name)

    router = EngineRouter(
        [TimedEngine(e, timeline, name) for e in engines], restart and timed_restart, max_restarts, restarts=restarts, rejoin=rejoin
    )
    return router


def untimed(engines: list[Engine]) -> list[Engine]:
    """The replicas of a ``timed_router`` without their timing."""
    return [e.engine if isinstance(e, TimedEngine) else e for e in engines]
