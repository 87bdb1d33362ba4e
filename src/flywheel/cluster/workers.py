"""The Ray actors of one run: engine replicas (behind the Engine seam) and the trainer."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import ray
import torch

from flywheel.config import Config
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.remote import RemoteEngine
from flywheel.weights.base import WeightTransport, WeightUpdate


@dataclass
class Workers:
    """The workers of one run: engine replicas and a Trainer actor."""

    engines: list[Engine]
    trainer: ray.actor.ActorHandle

    def sync_weights(self) -> int:
        """Trainer publishes, every engine loads; returns the version the engines now serve."""
        update: WeightUpdate = ray.get(self.trainer.publish_weights.remote())

        async def load_all() -> None:
            await asyncio.gather(*(engine.load_weights(update) for engine in self.engines))

        asyncio.run(load_all())
        return update.version

    def shutdown(self) -> None:
        ray.get(self.trainer.close.remote())
        ray.kill(self.trainer)
        for engine in self.engines:
            engine.shutdown()


def _init_ray() -> None:
    if not ray.is_initialized():
        ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False, logging_level="error")


def start_engines(config: Config, cpus: float = 1.0) -> list[Engine]:
    """Starts Ray if needed, then ``rollout.engines`` actors of the configured engine (``engine.name``)
    sharing ``cpus`` CPUs (and half a GPU if there is one)."""
    _init_ray()
    count = config.rollout.engines
    actor = ray.remote(engine_class(config.engine)).options(num_cpus=cpus / count, num_gpus=_gpu_share() / count)
    actors = [actor.remote(config) for _ in range(count)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    return [RemoteEngine(a) for a in actors]


def start_trainer(config: Config, transport: WeightTransport) -> ray.actor.ActorHandle:
    """A Trainer actor on one CPU (half a GPU if there is one), publishing weights through ``transport``."""
    from flywheel.trainer.trainer import Trainer

    trainer = ray.remote(Trainer).options(num_cpus=1, num_gpus=_gpu_share()).remote(config, transport)
    ray.get(trainer.__ray_ready__.remote())
    return trainer


def _gpu_share() -> float:
    return 0.5 if torch.cuda.is_available() else 0
