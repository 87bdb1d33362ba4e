"""The Ray actors of one run: engine replicas (behind the Engine seam) and the trainer group, on a
local Ray or a cluster joined through ``cluster.address``.

Placement (``cluster``): the trainer ranks sit in a placement group whose bundles require
``trainer_labels``; engine replicas are spread over the nodes matching ``engine_labels``. Colocated,
they share nodes (and one GPU, half each side); disaggregated, the trainer is placed first and the
engines are kept off its nodes (a label selector on ``ray.io/node-id``), a whole GPU each.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ray
from ray.exceptions import RayActorError

from flywheel.config import Config
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.remote import RemoteEngine
from flywheel.rollout.router import EngineFactory, Rejoin
from flywheel.weights.base import WeightTransport, WeightUpdate

if TYPE_CHECKING:
    from flywheel.trainer.group import TrainerGroup

JOIN_TIMEOUT_S = 10
ENGINE_START_TIMEOUT_S = 600  # a replacement replica not running by then (no node with room) is a failed restart


class ClusterUnavailable(RuntimeError):
    """The Ray cluster of ``cluster.address`` cannot be joined; the message says what to check."""


@dataclass
class Workers:
    """The workers of one run: engine replicas, the trainer group, how to start a replacement
    replica (None: a dead replica is not restarted), and, for a transport whose group a newcomer must
    join, how to re-send the latest weights to a re-formed group (``EngineRouter.rejoin``).
    ``engine_restarts``: replacements an earlier attempt of the run started (they count against
    rollout.max_engine_restarts). ``hand_back``: at its end the run puts the replicas serving then
    (replacements it started included, left running and now the caller's to stop) in ``engines`` and
    its restart count in ``engine_restarts``."""

    engines: list[Engine]
    trainer: TrainerGroup
    restart_engine: EngineFactory | None = None
    rejoin: Rejoin | None = None
    engine_restarts: int = 0
    hand_back: bool = False

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


def start_workers(config: Config, transport: WeightTransport) -> Workers:
    """Engines and trainer as ``cluster.placement`` asks, and the factory of replacement replicas."""
    if config.cluster.placement == "colocated":
        engines = start_engines(config)
        trainer = start_trainer(config, transport)
        return Workers(engines, trainer, *replacements(config, trainer))
    trainer = start_trainer(config, transport)
    try:
        avoid = trainer.node_ids()
        return Workers(start_engines(config, avoid_nodes=avoid), trainer, *replacements(config, trainer, avoid_nodes=avoid))
    except BaseException:
        trainer.shutdown()
        raise


def _init_ray(config: Config) -> None:
    """Joins ``cluster.address``, or starts a local Ray with a logical CPU for the engines and one per
    trainer rank at least (ranks share the cores when there are fewer)."""
    if ray.is_initialized():
        return
    address = config.cluster.address
    if address is None:
        # Ray starts its workers at nice 15 by default; here the workers are the job (Ray's job manager sets 0 too)
        os.environ.setdefault("RAY_worker_niceness", "0")
        cpus = max(2, os.cpu_count() or 2, 1 + config.trainer.ranks)
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="error")
        return
    if address != "auto":  # Ray itself retries an address that does not answer for minutes
        host, port = address.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=JOIN_TIMEOUT_S).close()
        except OSError as error:
            raise ClusterUnavailable(
                f"nothing answers at cluster.address {address!r} ({error.strerror or error}); start the head with `ray start --head` or fix the address"
            ) from None
    try:
        ray.init(address=address, log_to_driver=False, logging_level="error")
    except (ConnectionError, RuntimeError) as error:
        raise ClusterUnavailable(
            f"cannot join the Ray cluster at cluster.address {address!r} ({type(error).__name__}); check that its head is up (`ray status`)"
        ) from error


def _engine_actor(config: Config, cpus: float, avoid_nodes: list[str]):
    """The engine actor class with its resources and placement: spread over the nodes matching
    ``cluster.engine_labels``, none of ``avoid_nodes``."""
    count = config.rollout.engines
    gpus = _has_gpus() * (0.5 / count if config.cluster.placement == "colocated" else 1.0)
    selector = dict(config.cluster.engine_labels)
    if avoid_nodes:
        selector["ray.io/node-id"] = f"!in({','.join(avoid_nodes)})"
    return ray.remote(engine_class(config.engine)).options(
        num_cpus=cpus / count, num_gpus=gpus, label_selector=selector or None, scheduling_strategy="SPREAD"
    )


def start_engines(config: Config, cpus: float = 1.0, avoid_nodes: Sequence[str] = ()) -> list[Engine]:
    """Starts Ray if needed, then ``rollout.engines`` actors of the configured engine (``engine.name``)
    sharing ``cpus`` CPUs (and, colocated, half a GPU if there is one)."""
    _init_ray(config)
    actor = _engine_actor(config, cpus, list(avoid_nodes))
    actors = [actor.remote(config, replica) for replica in range(config.rollout.engines)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    return [RemoteEngine(a) for a in actors]


def replacements(config: Config, trainer: TrainerGroup, avoid_nodes: Sequence[str] = ()) -> tuple[EngineFactory | None, Rejoin | None]:
    """How a dead replica is replaced and, for the collective transport, how its group re-forms
    (trainer rank 0 re-sends the latest weights, whether the ranks are Ray actors or MPI processes);
    (None, None) where the trainer cannot re-send: a dead replica is then not replaced."""
    if config.weights.engines_can_rejoin:
        return engine_starter(config, avoid_nodes=avoid_nodes), None
    rejoin = getattr(trainer, "rejoin_weights", None)
    return (engine_starter(config, avoid_nodes=avoid_nodes), rejoin) if rejoin else (None, None)


def engine_starter(config: Config, cpus: float = 1.0, avoid_nodes: Sequence[str] = ()) -> EngineFactory:
    """Starts one more replica, placed and sized as ``start_engines`` places each (on any live node
    that fits), and returns it once its engine runs. A replica whose node dies before it ran (Ray may
    place it on a node that just died and is not yet known dead) is placed again; one whose engine
    fails to start raises."""
    actor = _engine_actor(config, cpus, list(avoid_nodes))

    async def start(replica: int = 0) -> Engine:
        deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
        while True:
            handle = actor.remote(config, replica)
            try:
                await asyncio.wait_for(asyncio.ensure_future(handle.__ray_ready__.remote()), max(deadline - time.monotonic(), 1))
                return RemoteEngine(handle)
            except RayActorError as error:
                ray.kill(handle)
                if error.actor_init_failed or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(1.0)
            except TimeoutError:
                ray.kill(handle)
                raise RuntimeError(
                    f"no replacement engine replica was running after {ENGINE_START_TIMEOUT_S} s: no live node matching cluster.engine_labels has room for one"
                ) from None
            except BaseException:
                ray.kill(handle)
                raise

    return start


def start_trainer(config: Config, transport: WeightTransport, trainer_class: type | None = None) -> TrainerGroup:
    """The trainer group: ``trainer.ranks`` ranks, a CPU each, the first publishing weights through
    ``transport``. Where there are GPUs and placement is colocated, one rank shares its GPU with the
    engines (half each); several ranks, or disaggregated ones, take a whole GPU each (Ray would pack two
    half-GPU ranks onto one device, which NCCL refuses). Under mpirun the ranks are the MPI processes
    instead (cluster/mpi.py)."""
    from flywheel.cluster.mpi import MPITrainerGroup, launched_by_mpi
    from flywheel.trainer.group import TrainerGroup
    from flywheel.trainer.trainer import Trainer

    _init_ray(config)  # under mpirun too: rank 0 is the run's Ray driver
    if launched_by_mpi():
        return MPITrainerGroup.start(config, transport, trainer_class or Trainer)
    shared = config.trainer.ranks == 1 and config.cluster.placement == "colocated"
    gpus = _has_gpus() * (0.5 if shared else 1.0)
    return TrainerGroup.start(config, transport, gpus, trainer_class or Trainer)


def _has_gpus() -> bool:
    """Whether the Ray cluster has GPUs (the driver may run on a node without one)."""
    return ray.cluster_resources().get("GPU", 0) > 0
