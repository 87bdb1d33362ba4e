"""An Engine in a Ray actor: the actor runs an implementation (``engines.engine_class``), callers
hold this client, so no caller touches Ray to generate or load weights."""

from __future__ import annotations

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayActorError

from flywheel.engines.base import EngineDied
from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate


class RemoteEngine:
    """The ``Engine`` whose implementation runs in the Ray actor ``actor``; a dead actor raises ``EngineDied``."""

    def __init__(self, actor: ActorHandle) -> None:
        self.actor = actor

    async def generate(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None = None
    ) -> list[list[Completion]]:
        try:
            return await self.actor.generate.remote(prompts, n, temperature, max_tokens, seed, stop)
        except RayActorError as error:
            raise EngineDied(str(error)) from error

    async def load_weights(self, update: WeightUpdate) -> float:
        try:
            return await self.actor.load_weights.remote(update)
        except RayActorError as error:
            raise EngineDied(str(error)) from error

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """The engine's own shutdown (its engine-core process), then the actor."""
        try:
            ray.get(self.actor.shutdown.remote(), timeout=timeout_s)
        except (RayActorError, GetTimeoutError):
            pass
        ray.kill(self.actor)
