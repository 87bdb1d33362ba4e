"""An Engine in a Ray actor: the actor runs an implementation (``engines.engine_class``), callers
hold this client, so no caller touches Ray to generate or load weights.

Generation calls made in the same turn of the caller's event loop (a step's groups, started together)
travel to the actor as one batch (``BatchedCalls`` to ``ServesBatches.serve_batch``, which serves any
coroutine method so), and their results stream back as they finish, several to a message when they
finish together: one Ray call a batch instead of one a group."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from flywheel.engines.base import EngineDied, Loaded
from flywheel.types import Completion
from flywheel.weights.base import WeightsCorrupt, WeightUpdate


class ServesBatches:
    """The actor side of the batching: any coroutine method of the actor, called for a batch of argument tuples."""

    async def serve_batch(self, method: str, requests: list[tuple]) -> AsyncIterator[list[tuple[int, Any]]]:
        """Runs ``method`` for every request concurrently; yields (index, result or the exception it raised)
        of those that finished since the last yield, until all have. A Ray streaming generator."""
        finished: asyncio.Queue = asyncio.Queue()
        call = getattr(self, method)

        async def run(index: int, request: tuple) -> None:
            try:
                finished.put_nowait((index, await call(*request)))
            except Exception as error:  # noqa: BLE001 - the caller of that request raises it
                finished.put_nowait((index, error))

        tasks = [asyncio.create_task(run(i, request)) for i, request in enumerate(requests)]
        try:
            left = len(requests)
            while left:
                ready = [await finished.get()]
                while not finished.empty():
                    ready.append(finished.get_nowait())
                left -= len(ready)
                yield ready
        finally:
            for task in tasks:
                task.cancel()


class BatchedCalls:
    """Calls of ``method`` on the actor ``actor`` (a ``ServesBatches``) made in the same turn of the caller's
    event loop travel as one Ray call, and each caller gets its own result or error. A dead actor raises
    Ray's ``RayActorError`` to every caller."""

    def __init__(self, actor: ActorHandle, method: str) -> None:
        self.actor, self.method = actor, method
        self._queued: list[tuple[tuple, asyncio.Future]] = []  # calls of this loop turn, not yet sent
        self._receiving: set[asyncio.Task] = set()
        self.batches_sent = 0  # Ray calls to the actor (each carries one or more calls)

    async def __call__(self, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        if not self._queued:
            loop.call_soon(self._send)
        future = loop.create_future()
        self._queued.append((args, future))
        return await future

    def _send(self) -> None:
        batch, self._queued = self._queued, []
        self.batches_sent += 1
        task = asyncio.ensure_future(self._receive(batch))
        self._receiving.add(task)
        task.add_done_callback(self._receiving.discard)

    async def _receive(self, batch: list[tuple[tuple, asyncio.Future]]) -> None:
        futures = [future for _, future in batch]
        try:
            async for ref in self.actor.serve_batch.options(num_returns="streaming").remote(self.method, [args for args, _ in batch]):
                for index, result in await ref:
                    if futures[index].done():  # its caller was cancelled
                        continue
                    if isinstance(result, Exception):
                        futures[index].set_exception(result)
                    else:
                        futures[index].set_result(result)
        except Exception as error:  # noqa: BLE001 - a dead actor, a request that cannot be sent: its callers raise it
            failure: BaseException = error
        else:
            return
        for future in futures:
            if not future.done():
                future.set_exception(failure)


class RemoteEngine:
    """The ``Engine`` whose implementation runs in the Ray actor ``actor``; a dead actor raises ``EngineDied``."""

    def __init__(self, actor: ActorHandle) -> None:
        self.actor = actor
        self._generate = BatchedCalls(actor, "generate")

    @property
    def batches_sent(self) -> int:
        """Generation calls to the actor (each carries one or more requests)."""
        return self._generate.batches_sent

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
        try:
            return await self._generate(prompts, n, temperature, max_tokens, seed, stop, schema)
        except RayActorError as error:
            raise EngineDied(str(error)) from error

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        try:
            return await self.actor.score.remote(sequences)
        except RayActorError as error:
            raise EngineDied(str(error)) from error

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        try:
            return await self.actor.load_weights.remote(update)
        except RayActorError as error:
            raise EngineDied(str(error)) from error
        except RayTaskError as error:
            if (corrupt := WeightsCorrupt.in_error(error)) is not None:
                raise WeightsCorrupt(corrupt) from None
            raise

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """The engine's own shutdown (its engine-core process), then the actor."""
        try:
            ray.get(self.actor.shutdown.remote(), timeout=timeout_s)
        except (RayActorError, GetTimeoutError):
            pass
        ray.kill(self.actor)
