"""The trainer group: ``trainer.ranks`` Trainer actors in one Ray placement group (a GPU share per
rank where there are GPUs, a CPU each), joined by torch.distributed, behind the one-trainer API.
The controller awaits these coroutines as it would call one trainer; a group of one is the
single-process trainer.

Rows are dealt to ranks so that every rank holds a share of every minibatch: minibatch m is the
m-th consecutive slice of the batch (as with one rank), and rank r takes its rows r, r + N, ...

A rank whose process dies fails the call with ``TrainerDied`` (naming the rank) as soon as Ray
reports it, even while the other ranks are still blocked in a collective with it; ``shutdown``
then kills them all.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace

import ray
import ray.cloudpickle as cloudpickle
import torch
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from flywheel.config import Config
from flywheel.trainer.distributed import open_store, store_address
from flywheel.trainer.trainer import LossFn, Trainer
from flywheel.types import StepResult, TrainBatch
from flywheel.weights.base import WeightTransport, WeightUpdate

PLACEMENT_TIMEOUT_S = 120
DEATH_GRACE_S = 10  # after one rank fails, how long the others get to report whether a rank died
CLOSE_TIMEOUT_S = 10


class TrainerDied(RuntimeError):
    """A trainer rank's process died during a group call."""

    def __init__(self, rank: int, method: str) -> None:
        super().__init__(f"trainer rank {rank} died during {method}")
        self.rank, self.method = rank, method


def deal_rows(rows: int, minibatches: int, ranks: int) -> list[list[torch.Tensor]]:
    """[rank][minibatch] -> the batch rows that rank trains on in that minibatch."""
    return [[share[r::ranks] for share in torch.arange(rows).tensor_split(minibatches)] for r in range(ranks)]


class TrainerGroup:
    def __init__(
        self, config: Config, transport: WeightTransport, actors: list[ray.actor.ActorHandle], group, store: ray.actor.ActorHandle | None = None
    ) -> None:
        self.config, self.transport, self.actors, self._placement, self._store = config, transport, actors, group, store
        self.ranks = len(actors)

    @classmethod
    def start(cls, config: Config, transport: WeightTransport, gpus_per_rank: float = 0.0, trainer_class: type = Trainer) -> TrainerGroup:
        """Places ``trainer.ranks`` ranks (one CPU and ``gpus_per_rank`` GPU each), waits until all joined."""
        n = config.trainer.ranks
        bundles = [{"CPU": 1, "GPU": gpus_per_rank} if gpus_per_rank else {"CPU": 1} for _ in range(n)]
        labels = config.cluster.trainer_labels
        group = placement_group(bundles, strategy="PACK", bundle_label_selector=[dict(labels)] * n if labels else None)
        try:
            ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            remove_placement_group(group)
            free = ray.available_resources()
            raise RuntimeError(
                f"trainer.ranks={n} needs {n} bundles of {bundles[0]} but Ray has {free.get('CPU', 0):g} CPUs and "
                f"{free.get('GPU', 0):g} GPUs free"
                + (f" in all, and only nodes matching cluster.trainer_labels {dict(labels)} qualify" if labels else "")
                + "; lower trainer.ranks or give Ray more resources"
            ) from None
        on = lambda rank: PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)  # noqa: E731
        # several ranks meet at a store served beside rank 0 for the group's life; one rank needs none (distributed.join)
        store = ray.remote(StoreHost).options(num_cpus=0, scheduling_strategy=on(0)).remote() if n > 1 else None
        address = ray.get(store.address.remote()) if store else None
        actor = ray.remote(trainer_class)
        actors = [
            actor.options(num_cpus=1, num_gpus=gpus_per_rank, scheduling_strategy=on(r)).remote(config, transport, r, n, address) for r in range(n)
        ]
        try:
            ray.get([a.__ray_ready__.remote() for a in actors])
        except Exception:
            cls(config, transport, actors, group, store).shutdown()
            raise
        return cls(config, transport, actors, group, store)

    async def _all(self, method: str, *per_rank_args) -> list:
        """Calls ``method`` on every rank (rank r gets the r-th of each argument list) and awaits all;
        raises TrainerDied when a rank's process died, else the first rank's failure."""
        calls = [asyncio.ensure_future(getattr(a, method).remote(*(args[r] for args in per_rank_args))) for r, a in enumerate(self.actors)]
        _, pending = await asyncio.wait(calls, return_when=asyncio.FIRST_EXCEPTION)
        if pending:  # a rank failed; the others may be blocked in a collective with it
            await asyncio.wait(pending, timeout=DEATH_GRACE_S)
        failures = [(rank, call.exception()) for rank, call in enumerate(calls) if call.done() and call.exception()]
        for rank, error in failures:
            if isinstance(error, ray.exceptions.RayActorError):
                raise TrainerDied(rank, method) from error
        if failures:
            raise failures[0][1]
        return [call.result() for call in calls]

    async def _rowwise(self, method: str, batch: TrainBatch) -> torch.Tensor:
        shares = [rows for [rows] in deal_rows(len(batch), 1, self.ranks)]
        outs = await self._all(method, [batch.select(rows) for rows in shares])
        result = torch.zeros(len(batch), *outs[0].shape[1:], dtype=outs[0].dtype)
        for rows, out in zip(shares, outs):
            result[rows] = out
        return result

    async def train_step(self, batch: TrainBatch, keep_logprobs: bool = False) -> StepResult:
        """``trainer.minibatches`` optimiser steps over ``batch``: the step's metrics, rank 0's spans
        and, when ``keep_logprobs``, the policy's logprobs of ``batch.tokens`` before the step's update, [B, T]."""
        deal = deal_rows(len(batch), self.config.trainer.minibatches, self.ranks)
        if keep_logprobs:
            await self._all("keep_logprobs")
        results = await self._all("train_step", [[batch.select(rows) for rows in minibatches] for minibatches in deal])
        logprobs = None
        if keep_logprobs:
            logprobs = torch.zeros(batch.tokens.shape)
            for minibatches, result in zip(deal, results):
                logprobs[torch.cat(minibatches)] = result.logprobs
        return replace(results[0], logprobs=logprobs)

    async def forward_backward(self, batch: TrainBatch, loss_fn: LossFn) -> dict[str, float]:
        """Accumulates the gradients of ``loss_fn`` over ``batch`` (rows dealt to the ranks as a one-minibatch
        step's are); the metrics of every rank's micro-batches."""
        shares = [rows for [rows] in deal_rows(len(batch), 1, self.ranks)]
        payload = by_value(loss_fn)
        return (await self._all("forward_backward_with", [batch.select(rows) for rows in shares], [payload] * self.ranks))[0]

    async def apply_gradients(self) -> dict[str, float]:
        """Clips and applies the accumulated gradients (skipped when not finite); the weights are the next version."""
        return (await self._all("apply_gradients"))[0]

    async def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        return await self._rowwise("logprobs", batch)

    async def values(self, batch: TrainBatch) -> torch.Tensor:
        return await self._rowwise("values", batch)

    async def sequence_kl(self, batch: TrainBatch) -> torch.Tensor:
        return await self._rowwise("sequence_kl", batch)

    async def publish_weights(self) -> WeightUpdate:
        return (await self._all("publish_weights"))[0]

    async def rejoin_weights(self, replicas: list[int]) -> WeightUpdate | None:
        """Rank 0 re-sends the latest weights to a re-formed group of these engine replica slots (the collective transport)."""
        return await self.actors[0].rejoin_weights.remote(replicas)

    async def save_checkpoint(self, directory: str, resumable: bool = True) -> None:
        await self._all("save_checkpoint", [directory] * self.ranks, [resumable] * self.ranks)

    async def restore(self, directory: str) -> int:
        return (await self._all("restore", [directory] * self.ranks))[0]

    def node_ids(self) -> list[str]:
        """The Ray node IDs the ranks run on."""
        return sorted(set(placement_group_table(self._placement)["bundles_to_node_id"].values()))

    def shutdown(self) -> None:
        """Removes the published weights (here, if rank 0 is dead or stuck), then kills the ranks
        (those blocked in a collective with a dead one too) and removes their placement."""
        try:
            ray.get(self.actors[0].close.remote(), timeout=CLOSE_TIMEOUT_S)
        except ray.exceptions.RayError:  # dead, or stuck past the timeout
            self.transport.close()
        finally:
            for actor in [*self.actors, *filter(None, [self._store])]:
                ray.kill(actor)
            remove_placement_group(self._placement)


def by_value(fn: LossFn) -> bytes:
    """``fn`` pickled with the code of its own module, which the trainer's processes may not be able to import (a
    test file, a notebook's helper module); flywheel's own functions travel by name."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    own = module is not None and module.__name__.partition(".")[0] not in ("flywheel", "__main__")
    if own:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(fn)
    finally:
        if own:
            cloudpickle.unregister_pickle_by_value(module)


class StoreHost:
    """A Ray actor beside rank 0 serving the TCP store its group meets at (``distributed.open_store``)."""

    def __init__(self) -> None:
        self.store = open_store(ray.util.get_node_ip_address())

    def address(self) -> str:
        return store_address(self.store)
