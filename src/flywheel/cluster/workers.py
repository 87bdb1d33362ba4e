"""The one place that builds and stops a run's Ray actors: the engine replicas (behind the Engine seam),
the trainer group, the evaluation replicas, a judge's own engine, the reward-model actor and the
replacements of dead replicas, on a local Ray or a cluster joined through ``cluster.address``.

Each actor is built from a small frozen spec, never from the whole config: ``run_spec`` derives them all
from the config once (the core split of cluster/cores.py applied), and a plain run (controller.train), a
supervised one (supervisor.supervise), ``flywheel eval`` and the background eval start their actors from
those specs, so that they are placed alike.

Placement (``cluster``): the trainer ranks sit in a placement group whose bundles require
``trainer_labels``; engine replicas are spread over the nodes matching ``engine_labels``. Colocated,
they share nodes (and one GPU, half each side); disaggregated, the trainer is placed first and the
run's engines are kept off its nodes (a label selector on ``ray.io/node-id``), a whole GPU each.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import ray
from ray.exceptions import RayActorError

from flywheel.cluster.cores import split_for_async
from flywheel.config import Config
from flywheel.config.algorithms import teacher_directory
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.endpoint import EndpointScorer
from flywheel.engines.remote import RemoteEngine
from flywheel.engines.spec import EngineSpec
from flywheel.rollout.router import EngineFactory, EngineRouter, Rejoin
from flywheel.weights.base import WeightTransport, WeightUpdate

if TYPE_CHECKING:
    from flywheel.rollout.worker import RolloutWorkers
    from flywheel.trainer.group import TrainerGroup

JOIN_TIMEOUT_S = 10
ENGINE_START_TIMEOUT_S = 600  # a replacement replica not running by then (no node with room) is a failed restart


class ClusterUnavailable(RuntimeError):
    """The Ray cluster of ``cluster.address`` cannot be joined; the message says what to check."""


@dataclass(frozen=True)
class RayCluster:
    """The Ray a run's actors live on: the cluster at ``address``, or (None) a local one with a logical CPU
    for the engines and one per trainer rank at least (``min_cpus``)."""

    address: str | None
    min_cpus: int


@dataclass(frozen=True)
class Placement:
    """Where a group of actors runs and what it reserves: ``cpus`` logical CPUs for the whole group (0: it
    shares the run's), ``gpu_share`` of a GPU per actor where the cluster has GPUs, nodes matching
    ``labels``, and (``apart_from_trainer``, disaggregated) none of the trainer ranks' nodes."""

    cluster: RayCluster
    cpus: float
    gpu_share: float
    labels: Mapping[str, str] = field(default_factory=dict)
    apart_from_trainer: bool = False


@dataclass(frozen=True)
class EngineGroup:
    """``replicas`` engine replicas of ``spec`` (replica i gets ``spec.replica = i``) placed by ``placement``."""

    spec: EngineSpec
    replicas: int
    placement: Placement


@dataclass(frozen=True)
class TrainerSpec:
    """The trainer group: the config every rank reads (trainer/ takes the run's config; its trainer section
    carries the core split) and ``gpu_share`` of a GPU per rank where the cluster has GPUs."""

    config: Config
    gpu_share: float
    cluster: RayCluster


@dataclass(frozen=True)
class RewardModelSpec:
    """A reward model scoring in a Ray actor of its own (rewards/reward_model.py); it shares the run's CPUs."""

    path: str
    batch_size: int
    max_length: int
    threads: int = 1


@dataclass(frozen=True)
class RolloutWorkerGroup:
    """``count`` rollout workers (rollout/worker.py) reading ``config`` (tasks, rewards, algorithm), spread over the
    nodes matching ``placement``'s labels, a logical CPU each on a cluster (none on a local Ray: they share the run's)."""

    config: Config
    count: int
    placement: Placement


@dataclass(frozen=True)
class RunSpec:
    """Every actor of a run. ``config``: the run's config as resolved for them (the core split applied),
    the one the run records; ``notes``: lines for the run's log saying what was resolved."""

    config: Config
    engines: EngineGroup
    trainer: TrainerSpec
    eval_engines: EngineGroup | None
    judge: EngineGroup | None
    teacher: EngineGroup | None
    reward_model: RewardModelSpec | None
    max_engine_restarts: int
    rollout_workers: RolloutWorkerGroup | None = None
    notes: tuple[str, ...] = ()


def ray_cluster(config: Config) -> RayCluster:
    return RayCluster(config.cluster.address, 1 + config.trainer.ranks)


def engine_spec(config: Config, model: str | None = None) -> EngineSpec:
    """A replica of the configured engine serving ``model`` (None: the policy, ``model.path``)."""
    return EngineSpec(model or config.model.path, config.model.dtype, config.run.seed, config.engine, config.weights)


def engine_group(config: Config, model: str | None = None, replicas: int | None = None, cpus: float = 1.0, apart: bool = False) -> EngineGroup:
    """``replicas`` (None: ``rollout.engines``) replicas serving ``model`` (None: the policy), sharing ``cpus``
    logical CPUs and, colocated, half a GPU; disaggregated, a whole GPU each, and off the trainer's nodes
    when ``apart``."""
    count = replicas or config.rollout.engines
    disaggregated = config.cluster.placement == "disaggregated"
    gpu_share = 1.0 if disaggregated else 0.5 / count
    placement = Placement(ray_cluster(config), cpus, gpu_share, dict(config.cluster.engine_labels), apart and disaggregated)
    return EngineGroup(engine_spec(config, model), count, placement)


def trainer_spec(config: Config) -> TrainerSpec:
    """Where there are GPUs and placement is colocated, one rank shares its GPU with the engines (half
    each); several ranks, or disaggregated ones, take a whole GPU each (Ray would pack two half-GPU ranks
    onto one device, which NCCL refuses)."""
    shared = config.trainer.ranks == 1 and config.cluster.placement == "colocated"
    return TrainerSpec(config, 0.5 if shared else 1.0, ray_cluster(config))


def run_spec(config: Config, cores: Iterable[int] = (), gpu: bool = False) -> RunSpec:
    """The specs of every actor of a run of ``config`` on a machine whose driver may use ``cores`` (with
    ``gpu``): the policy's engines and the trainer on separate halves of them where cluster/cores.py
    splits them; the evaluation replicas, a judge's own engine and a distillation teacher's share the engines' CPUs."""
    config, split = split_for_async(config, cores, gpu)
    r = config.reward
    judge = r.judge.enabled and r.judge.engine == "own"
    rm = r.reward_model
    return RunSpec(
        config=config,
        engines=engine_group(config, apart=True),
        trainer=trainer_spec(config),
        eval_engines=engine_group(config, replicas=config.eval.engines, cpus=0) if config.eval.engines else None,
        judge=engine_group(config, model=r.judge.model_path, replicas=1, cpus=0) if judge else None,
        teacher=engine_group(config, model=teacher, replicas=1, cpus=0) if (teacher := teacher_directory(config.algorithm)) else None,
        reward_model=RewardModelSpec(rm.path, rm.batch_size, rm.max_length) if rm.path else None,
        max_engine_restarts=config.rollout.max_engine_restarts,
        rollout_workers=rollout_worker_group(config) if config.rollout.workers else None,
        notes=(split,) if split else (),
    )


def rollout_worker_group(config: Config) -> RolloutWorkerGroup:
    cluster = ray_cluster(config)
    cpus = 0.0 if cluster.address is None else config.cluster.rollout_cpus * config.rollout.workers
    return RolloutWorkerGroup(config, config.rollout.workers, Placement(cluster, cpus, 0.0, dict(config.cluster.rollout_labels)))


def local_run_spec(config: Config) -> RunSpec:
    """``run_spec`` for the cores and GPUs of this process; under mpirun no split (the trainer ranks are
    the MPI processes, placed by the launcher)."""
    import torch

    from flywheel.cluster.mpi import launched_by_mpi

    cores = () if launched_by_mpi() else os.sched_getaffinity(0)
    gpu = torch.cuda.is_available()
    spec = run_spec(config, cores, gpu)
    slow = not gpu and config.cluster.address is None and not torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return replace(spec, notes=(*spec.notes, note)) if (note := bf16_note(config, slow)) else spec


def bf16_note(config: Config, cpu_lacks_bf16: bool) -> str | None:
    """A line for the run's log when the trainer computes in bf16 on a CPU that has no bf16 matrix
    instructions (AVX-512 bf16 or AMX; ``cpu_lacks_bf16``), where torch emulates them."""
    if config.model.dtype != "bfloat16" or not cpu_lacks_bf16:
        return None
    return (
        "model.dtype=bfloat16 on a CPU without bf16 matrix instructions (AVX-512 bf16 or AMX): torch emulates them, and the "
        "trainer's bf16 matmuls run 6-166x slower than float32 here (bench/bf16_matmul.md); model.dtype=float32 trains faster"
    )


@dataclass
class Workers:
    """The workers of one run: engine replicas, the trainer group, how to start a replacement
    replica (None: a dead replica is not restarted), and, for a transport whose group a newcomer must
    join, how to re-send the latest weights to a re-formed group (``EngineRouter.rejoin``).
    ``engine_restarts``: replacements an earlier attempt of the run started (they count against
    rollout.max_engine_restarts). ``hand_back``: at its end the run puts the replicas serving then
    (replacements it started included, left running and now the caller's to stop) in ``engines`` and
    its restart count in ``engine_restarts``. ``notes``: the run spec's lines for the run's log."""

    engines: list[Engine]
    trainer: TrainerGroup
    restart_engine: EngineFactory | None = None
    rejoin: Rejoin | None = None
    engine_restarts: int = 0
    hand_back: bool = False
    notes: tuple[str, ...] = ()

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


def start_workers(
    spec: RunSpec, transport: WeightTransport, trainer_class: type | None = None, engines: list[Engine] | None = None, engine_restarts: int = 0
) -> Workers:
    """The trainer group and the run's engines as ``cluster.placement`` asks, and the factory of
    replacement replicas. ``engines``: serve with these, already placed (a supervised run's next attempt,
    a test's shared engine), and hand them back at the end (``Workers.hand_back``); only the trainer is
    started then."""
    given = engines is not None
    if given:
        served, trainer = engines, start_trainer(spec.trainer, transport, trainer_class)
        avoid = trainer.node_ids() if spec.engines.placement.apart_from_trainer else []
    elif not spec.engines.placement.apart_from_trainer:
        served, trainer = start_side_by_side(spec, transport, trainer_class)
        avoid = []
    else:
        trainer = start_trainer(spec.trainer, transport, trainer_class)
        try:
            avoid = trainer.node_ids()
            served = start_engines(spec.engines, avoid_nodes=avoid)
        except BaseException:
            trainer.shutdown()
            raise
    restart, rejoin = replacements(spec.engines, trainer, avoid_nodes=avoid)
    return Workers(served, trainer, restart, rejoin, engine_restarts, hand_back=given, notes=spec.notes)


def start_side_by_side(spec: RunSpec, transport: WeightTransport, trainer_class: type | None) -> tuple[list[Engine], TrainerGroup]:
    """The engines and, from a thread, the trainer group at once: each start is mostly processes importing
    and loading on their own, so the run waits for the slower one only (quickstart: about 20 s of engine and
    11 s of trainer). Under mpirun (the trainer's ranks are this process and its MPI peers) the engines
    first, then the trainer here. What started is stopped if the other fails."""
    from flywheel.cluster.mpi import launched_by_mpi

    connect(spec.engines.placement.cluster)  # once, before two threads use Ray
    pool = ThreadPoolExecutor(1, thread_name_prefix="start-trainer")
    starting = None if launched_by_mpi() else pool.submit(start_trainer, spec.trainer, transport, trainer_class)
    try:
        served = start_engines(spec.engines)
    except BaseException:
        pool.shutdown()  # waits for the trainer's start, to stop it
        if starting and not starting.exception():
            starting.result().shutdown()
        raise
    try:
        return served, starting.result() if starting else start_trainer(spec.trainer, transport, trainer_class)
    except BaseException:
        for engine in served:
            engine.shutdown()
        raise
    finally:
        pool.shutdown()


def connect(cluster: RayCluster) -> None:
    """Joins ``cluster.address``, or starts a local Ray with ``min_cpus`` logical CPUs at least (ranks
    share the cores when there are fewer); nothing if Ray is up."""
    if ray.is_initialized():
        return
    address = cluster.address
    if address is None:
        # Ray starts its workers at nice 15 by default; here the workers are the job (Ray's job manager sets 0 too)
        os.environ.setdefault("RAY_worker_niceness", "0")
        cpus = max(2, os.cpu_count() or 2, cluster.min_cpus)
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


def engine_options(placement: Placement, replicas: int, gpus: bool, avoid_nodes: Sequence[str]) -> dict:
    """Ray's options of each of ``replicas`` engine actors placed by ``placement`` (``gpus``: the cluster
    has GPUs): spread over the nodes matching its labels, none of ``avoid_nodes``."""
    selector = dict(placement.labels)
    if avoid_nodes:
        selector["ray.io/node-id"] = f"!in({','.join(avoid_nodes)})"
    return {
        "num_cpus": placement.cpus / replicas,
        "num_gpus": gpus * placement.gpu_share,
        "label_selector": selector or None,
        "scheduling_strategy": "SPREAD",
    }


def _engine_actor(group: EngineGroup, avoid_nodes: Sequence[str]):
    options = engine_options(group.placement, group.replicas, _has_gpus(), avoid_nodes)
    return ray.remote(engine_class(group.spec.options)).options(**options)


def start_engines(group: EngineGroup, avoid_nodes: Sequence[str] = ()) -> list[Engine]:
    """Starts Ray if needed, then the group's replicas; returns them once their engines run."""
    connect(group.placement.cluster)
    actor = _engine_actor(group, avoid_nodes)
    actors = [actor.remote(replace(group.spec, replica=replica)) for replica in range(group.replicas)]
    try:
        ray.get([a.__ray_ready__.remote() for a in actors])
    except BaseException:
        for a in actors:
            ray.kill(a)
        raise
    return [RemoteEngine(a) for a in actors]


def replacements(group: EngineGroup, trainer: TrainerGroup, avoid_nodes: Sequence[str] = ()) -> tuple[EngineFactory | None, Rejoin | None]:
    """How a dead replica of ``group`` is replaced and, for the collective transport, how its group re-forms
    (trainer rank 0 re-sends the latest weights, whether the ranks are Ray actors or MPI processes);
    (None, None) where the trainer cannot re-send: a dead replica is then not replaced."""
    if group.spec.weights.engines_can_rejoin:
        return engine_starter(group, avoid_nodes=avoid_nodes), None
    rejoin = getattr(trainer, "rejoin_weights", None)
    return (engine_starter(group, avoid_nodes=avoid_nodes), rejoin) if rejoin else (None, None)


def engine_starter(group: EngineGroup, avoid_nodes: Sequence[str] = ()) -> EngineFactory:
    """Starts one more replica, placed and sized as ``start_engines`` places each (on any live node
    that fits), and returns it once its engine runs. A replica whose node dies before it ran (Ray may
    place it on a node that just died and is not yet known dead) is placed again; one whose engine
    fails to start raises."""
    actor = _engine_actor(group, avoid_nodes)

    async def start(replica: int = 0) -> Engine:
        deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
        while True:
            handle = actor.remote(replace(group.spec, replica=replica))
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


def start_trainer(spec: TrainerSpec, transport: WeightTransport, trainer_class: type | None = None) -> TrainerGroup:
    """The trainer group: ``trainer.ranks`` ranks, a CPU each, the first publishing weights through
    ``transport``. Under mpirun the ranks are the MPI processes instead (cluster/mpi.py)."""
    from flywheel.cluster.mpi import MPITrainerGroup, launched_by_mpi
    from flywheel.trainer.group import TrainerGroup
    from flywheel.trainer.trainer import Trainer

    connect(spec.cluster)  # under mpirun too: rank 0 is the run's Ray driver
    if launched_by_mpi():
        return MPITrainerGroup.start(spec.config, transport, trainer_class or Trainer)
    return TrainerGroup.start(spec.config, transport, _has_gpus() * spec.gpu_share, trainer_class or Trainer)


@dataclass
class RewardActors:
    """The reward side's actors of a run: a judge's own engine and a distillation teacher's, each behind a router
    of its own (which restarts it when it dies, ``rollout.max_engine_restarts``), and a reward model's actor;
    None where not configured."""

    judge: EngineRouter | None = None
    teacher: EngineRouter | EndpointScorer | None = None
    reward_model: ray.actor.ActorHandle | None = None

    def score_texts(self):
        """The reward model's scoring call (awaitable), or None."""
        return None if self.reward_model is None else self.reward_model.score.remote

    async def stop(self) -> None:
        if self.reward_model is not None:
            ray.kill(self.reward_model)
        for router in (r for r in (self.judge, self.teacher) if isinstance(r, EngineRouter)):
            await router.close(keep_serving=True)  # cancels a restart under way
            router.shutdown()  # the engine in its slot, the first or a replacement


def start_reward_actors(spec: RunSpec) -> RewardActors:
    """The judge's and the teacher's own engines and the reward model's actor that ``spec`` asks for (Ray must be up)."""
    actors = RewardActors()
    if spec.judge is not None:  # first: they wait for their engines, which may fail to start
        actors.judge = EngineRouter(start_engines(spec.judge), engine_starter(spec.judge), spec.max_engine_restarts)
    try:
        if spec.teacher is not None:
            actors.teacher = EngineRouter(start_engines(spec.teacher), engine_starter(spec.teacher), spec.max_engine_restarts)
        elif getattr(a := spec.config.algorithm, "teacher", None):  # a teacher URL (a directory is spec.teacher)
            actors.teacher = EndpointScorer(a.teacher, a.teacher_model, api_key_env=a.teacher_api_key_env)
    except BaseException:
        if actors.judge is not None:  # started above: not left behind
            actors.judge.shutdown()
        raise
    if (rm := spec.reward_model) is not None:
        from flywheel.rewards.reward_model import RewardModel

        model = ray.remote(RewardModel).options(num_cpus=0)
        actors.reward_model = model.remote(rm.path, batch_size=rm.batch_size, max_length=rm.max_length, threads=rm.threads)
    return actors


def start_rollout_workers(
    group: RolloutWorkerGroup, reward_model: ray.actor.ActorHandle | None, log=lambda _: None, judge: EngineRouter | None = None
) -> RolloutWorkers:
    """The run's rollout workers, running (Ray must be up); a worker that cannot start raises its error.
    ``judge``: the router of the judge's own engine, whose actor the workers' judges call."""
    from flywheel.rollout.worker import RolloutWorker, RolloutWorkers

    p = group.placement
    actor = ray.remote(RolloutWorker).options(
        num_cpus=p.cpus / group.count, label_selector=dict(p.labels) or None, scheduling_strategy="SPREAD", max_concurrency=10_000
    )
    workers = RolloutWorkers(lambda slot: actor.remote(group.config, reward_model), group.count, log, judge)
    try:
        workers.ready()
    except BaseException:
        workers.stop()
        raise
    return workers


def _has_gpus() -> bool:
    """Whether the Ray cluster has GPUs (the driver may run on a node without one)."""
    return ray.cluster_resources().get("GPU", 0) > 0
