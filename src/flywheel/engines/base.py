"""The engine seam: everything the rollout side needs from an inference engine."""

from __future__ import annotations

from typing import Protocol

from flywheel.types import Completion


class Engine(Protocol):
    weight_version: int

    def generate(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions of each prompt (token ids), with per-token logprobs and weight version.

        A completion also ends after any of the ``stop`` strings, which it keeps.
        """
        ...

    def load_weights(self, path: str, version: int) -> None:
        """Loads the weights published at ``path`` in place; later completions carry ``version``."""
        ...
