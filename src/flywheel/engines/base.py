"""The engine seam: everything the rollout side needs from an inference engine (a Ray actor in a run)."""

from __future__ import annotations

from typing import Protocol

from flywheel.types import Completion


class Engine(Protocol):
    weight_version: int

    async def generate(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions of each prompt (token ids), with per-token logprobs and weight versions;
        a completion also ends after any of the ``stop`` strings, which it keeps."""
        ...

    async def load_weights(self, path: str, version: int) -> float:
        """Loads the weights published at ``path`` in place, without dropping requests in flight;
        tokens generated afterwards carry ``version``. Returns the seconds generation was paused."""
        ...

    def shutdown(self) -> None:
        """Stops the engine's processes."""
        ...
