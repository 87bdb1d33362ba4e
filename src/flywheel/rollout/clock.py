"""A group's clock: the engine one group generates on, noting when each of its generate calls ran; what a
group does between its calls (and after its last one) is its environments' steps (the timeline's ``env``)."""

from __future__ import annotations

import time

from flywheel.engines.base import Engine, Loaded
from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate


class GroupClock:
    """An Engine that forwards to ``engine`` and notes the (start, end) of each generate call."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.calls = engine, []

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
        start = time.time()
        try:
            return await self.engine.generate(prompts, n, temperature, max_tokens, seed, stop, schema)
        finally:
            self.calls.append((start, time.time()))

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        return await self.engine.load_weights(update)

    def shutdown(self) -> None:
        self.engine.shutdown()

    def gaps(self, end: float) -> list[tuple[float, float]]:
        """From the end of each call to the start of the next, the last one to ``end``."""
        starts = [start for start, _ in self.calls[1:]] + [end]
        return [(stop, start) for (_, stop), start in zip(self.calls, starts) if start >= stop]
