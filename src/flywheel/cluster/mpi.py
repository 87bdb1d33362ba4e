"""Trainer ranks launched by MPI: ``mpirun -np N flywheel train CONFIG``.

Every MPI process runs the CLI. Rank 0 runs the controller as usual (Ray, the engines, the reward
actors) and is trainer rank 0 in its own process; ranks 1..N-1 each build a Trainer and follow rank
0's calls until it closes the group. The calls travel over MPI (mpi4py: each rank's arguments
scattered, the results gathered); the trainer ranks' tensors travel over torch.distributed as with
Ray, meeting at an address rank 0 chose and broadcast. ``MPITrainerGroup`` is the same
``TrainerGroup`` API, so the controller does not know how its ranks were started.

An MPI launch is recognised from the launcher's environment with more than one process (Open MPI:
OMPI_COMM_WORLD_SIZE; PMI: PMI_SIZE; Slurm's PMIx: PMIX_RANK with SLURM_STEP_NUM_TASKS); the MPI
processes are then the trainer ranks (trainer.ranks must be 1, the default, or their number). A rank
that dies ends the whole job (MPI's rule), so run.supervise is refused: resume with run.resume. An
error on any rank aborts the job, rather than leave the others waiting for a call.

Stop signals (preemption.py) reach every rank: srun sends SIGTERM to every task, mpirun forwards
SIGUSR1 at once (SIGTERM only after ``odls_base_sigkill_timeout`` seconds, with SIGKILL as many seconds
later: 1 by default). Rank 0 decides: it stops at the next step boundary, saves the checkpoint with the
other ranks and releases them, and exits 6; the others only note the signal (a second one ends them
at once, which aborts the job).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import ray
import torch

from flywheel.cluster.local_gpu import launcher_local_rank, local_gpu
from flywheel.config import Config, ConfigError
from flywheel.preemption import StopSignals
from flywheel.trainer.distributed import open_store, store_address
from flywheel.trainer.group import TrainerGroup
from flywheel.trainer.trainer import Trainer
from flywheel.weights import open_transport
from flywheel.weights.base import WeightTransport, WeightUpdate

IDLE_POLL_S = 0.001


def launched_by_mpi() -> bool:
    """Whether an MPI launcher started this process as one of several: Open MPI's mpirun, a PMI
    launcher (MPICH's and Intel MPI's mpiexec, srun --mpi=pmi2), or srun --mpi=pmix."""
    env = os.environ
    sizes = (env.get("OMPI_COMM_WORLD_SIZE"), env.get("PMI_SIZE"), env.get("SLURM_STEP_NUM_TASKS") if "PMIX_RANK" in env else None)
    return any(int(size or 1) > 1 for size in sizes)


def world():
    """MPI_COMM_WORLD (mpi4py initialises MPI on first import)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def mpi_ranks(config: Config, size: int) -> Config:
    """``config`` with one trainer rank per MPI process; one sentence when it asks for something else."""
    if config.trainer.ranks not in (1, size):
        raise ConfigError(
            f"trainer.ranks is {config.trainer.ranks} but MPI started {size} processes: under mpirun every process is a trainer rank, so leave trainer.ranks at 1 or set it to {size}"
        )
    if config.run.supervise:
        raise ConfigError("run.supervise cannot restart MPI ranks (a dead rank ends the whole MPI job); leave it out and resume with run.resume")
    return config.model_copy(update={"trainer": config.trainer.model_copy(update={"ranks": size})})


def run_rank(config: Config, lead: Callable[[Config], int]) -> int:
    """This process's part of an MPI launch: ``lead(config)`` (the run) on rank 0, ``follow`` elsewhere;
    a nonzero exit or an exception on any rank aborts the whole job with that code."""
    comm = world()
    try:
        config = mpi_ranks(config, comm.Get_size())
        code = lead(config) if comm.Get_rank() == 0 else follow(config)
    except ConfigError as error:
        print(f"flywheel: error: {error}", file=sys.stderr)
        code = 2
    except BaseException:  # noqa: BLE001 - whatever it is, the other ranks must not wait for this one
        traceback.print_exc()
        code = 1
    if code and not MPITrainerGroup.released:  # a rank may be waiting for a call that will not come
        comm.Abort(code)
    return code


class MPITrainerGroup(TrainerGroup):
    """Rank 0's end of the group: its own Trainer in this process, the other ranks over MPI. The API
    and the dealing of rows come from TrainerGroup; only how a call reaches the ranks differs."""

    released = False  # whether rank 0 released the other ranks from ``follow`` (they exit 0)

    def __init__(self, config: Config, trainer: Trainer, comm, store=None) -> None:
        self.config, self.trainer, self.comm, self.ranks = config, trainer, comm, comm.Get_size()
        self.store = store  # the TCP store the ranks met at, served by this process for the group's life
        self._caller = ThreadPoolExecutor(1, thread_name_prefix="mpi-trainer")  # one call at a time, off the event loop

    @classmethod
    def start(cls, config: Config, transport: WeightTransport, trainer_class: type = Trainer) -> MPITrainerGroup:
        """Trainer rank 0 here; the followers join it at the store this process serves, its address broadcast to them."""
        comm = world()
        store = open_store(ray.util.get_node_ip_address())
        address = _when_all_arrive(comm).bcast(store_address(store), root=0)
        return cls(config, trainer_class(config, transport, 0, comm.Get_size(), address, device=rank_device(comm)), comm, store)

    async def _all(self, method: str, *per_rank_args) -> list:
        return await asyncio.get_running_loop().run_in_executor(self._caller, self._call, method, per_rank_args)

    def _call(self, method: str, per_rank_args: tuple = ()) -> list:
        """``method`` on every rank with its arguments (rank r: the r-th of each list); the results, or the first rank's error raised."""
        calls = [(method, tuple(args[r] for args in per_rank_args)) for r in range(self.ranks)]
        mine = _when_all_arrive(self.comm).scatter(calls, root=0)
        results = _when_all_arrive(self.comm).gather(_run(self.trainer, mine), root=0)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    async def rejoin_weights(self, replicas: list[int]) -> WeightUpdate | None:
        """Rank 0's transport re-forms its group with these engine replica slots and re-sends the latest
        weights (``Trainer.rejoin_weights``). Only rank 0 takes part, so no MPI call: it waits for the
        call in flight, as a Ray rank's actor would."""
        return await asyncio.get_running_loop().run_in_executor(self._caller, self.trainer.rejoin_weights, replicas)

    def node_ids(self) -> list[str]:
        """The Ray node of rank 0 (the driver's): the other MPI ranks' nodes need not be Ray nodes at all,
        so under disaggregated placement keep engines off them with cluster.engine_labels."""
        return [ray.get_runtime_context().get_node_id()]

    def shutdown(self) -> None:
        """After any call in flight, removes the published weights, then releases the followers (they
        return from ``follow``)."""
        self._caller.shutdown()  # waits for the call in flight: one thread at a time talks MPI
        try:
            self._call("close")
        finally:
            _when_all_arrive(self.comm).scatter([None] * self.ranks, root=0)
            MPITrainerGroup.released = True


def follow(config: Config) -> int:
    """Ranks 1..N-1: a Trainer that runs rank 0's calls until it closes the group; exit code 0. A stop
    signal is only noted (rank 0, which gets it too, stops the run); a second one raises KeyboardInterrupt."""
    StopSignals().install()
    comm = world()
    address = _when_all_arrive(comm).bcast(None, root=0)
    transport = open_transport(config.weights, config.rollout.engines)
    trainer = Trainer(config, transport, comm.Get_rank(), comm.Get_size(), address, device=rank_device(comm))
    while (call := _when_all_arrive(comm).scatter(None, root=0)) is not None:
        _when_all_arrive(comm).gather(_run(trainer, call), root=0)
    return 0


def rank_device(comm) -> int:
    """This process's GPU index where CUDA is available (its node-local one, ``local_gpu``), else 0.
    Every rank calls it at the same point: without a launcher's local rank (alike for every process
    of a launch) the ranks split ``comm`` by node, a collective."""
    shared = None
    if launcher_local_rank(os.environ) is None:
        from mpi4py import MPI

        shared = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    return local_gpu(os.environ, torch.cuda.device_count(), shared) if torch.cuda.is_available() else 0


def _when_all_arrive(comm):
    """``comm``, once every rank has reached this point, waited for asleep: MPI's blocking collectives
    spin, and ranks waiting for rank 0's next call (which may come minutes later) would take cores
    from the engines and from rank 0."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(IDLE_POLL_S)
    return comm


def _run(trainer: Trainer, call: tuple[str, tuple]):
    """The call's result, or its exception (sent to rank 0, which raises it)."""
    method, args = call
    try:
        return getattr(trainer, method)(*args)
    except Exception as error:  # noqa: BLE001 - rank 0 raises it
        return error
