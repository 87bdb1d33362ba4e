"""The Ray actors of one run: engine replicas (behind the Engine seam) and the trainer group."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ray
import torch

from flywheel.config import Config
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.remote import RemoteEngine
from flywheel.weights.base import WeightTransport, WeightUpdate

if TYPE_CHECKING:
    from flywheel.trainer.group import TrainerGroup


@dataclass
class Workers:
    """The workers of one run: engine replicas and the trainer group."""

    engines: list[Engine]
    trainer: TrainerGroup

    def sync_weights(self) -> int:
        """Trainer publishes, every engine loads; returns the version the engines now serve."""

        async def sync() -> int:
            update: WeightUpdate = await self.trainer.publish_weights()
            await asyncio.gather(*(engine.load_weights(update) for engine in self.engines))
            return update.version

        return asyncio.run(sync())

    def shutdown(self) -> None:
        self.trainer.shutdown()
        for engine in self.engines:
            engine.shutdown()


def _init_ray(config: Config) -> None:
    """Starts Ray with a logical CPU for the engines and one per trainer rank at least (ranks share the
    cores when there are fewer)."""
    if not ray.is_initialized():
        cpus = max(2, os.cpu_count() or 2, 1 + config.trainer.ranks)
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="error")


def start_engines(config: Config, cpus: float = 1.0) -> list[Engine]:
    """Starts Ray if needed, then ``rollout.engines`` actors of the configured engine (``engine.name``)
    sharing ``cpus`` CPUs (and half a GPU if there is one)."""
    _init_ray(config)
    count = config.rollout.engines
    actor = ray.remote(engine_class(config.engine)).options(num_cpus=cpus / count, num_gpus=_gpu_share() / count)
    actors = [actor.remote(config, replica) for replica in range(count)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    return [RemoteEngine(a) for a in actors]


def start_trainer(config: Config, transport: WeightTransport, trainer_class: type | None = None) -> TrainerGroup:
    """The trainer group: ``trainer.ranks`` ranks, a CPU each, the first publishing weights through
    ``transport``. Where there are GPUs, one rank shares its GPU with the engines (half each); several
    ranks take a whole GPU each (Ray would pack two half-GPU ranks onto one device, which NCCL refuses).
    Under mpirun the ranks are the MPI processes instead (cluster/mpi.py)."""
    from flywheel.cluster.mpi import MPITrainerGroup, launched_by_mpi
    from flywheel.trainer.group import TrainerGroup
    from flywheel.trainer.trainer import Trainer

    if launched_by_mpi():
        return MPITrainerGroup.start(config, transport, trainer_class or Trainer)
    _init_ray(config)
    gpus = _gpu_share() if config.trainer.ranks == 1 else float(_gpu_share() > 0)
    return TrainerGroup.start(config, transport, gpus, trainer_class or Trainer)


def _gpu_share() -> float:
    return 0.5 if torch.cuda.is_available() else 0
