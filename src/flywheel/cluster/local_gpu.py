"""Which GPU an MPI trainer rank takes: the one at its node-local rank among the GPUs it sees.

The node-local rank (a process's index among the launch's processes on its node) comes from the
launcher: Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's and Intel MPI's MPI_LOCALRANKID, Slurm's
SLURM_LOCALID; without any of them, from MPI itself (the rank within COMM_TYPE_SHARED, which the
caller computes). Indices count the GPUs CUDA_VISIBLE_DEVICES leaves visible, so with
CUDA_VISIBLE_DEVICES=4,5 local rank 1 takes physical GPU 5. A process shown exactly one GPU by
CUDA_VISIBLE_DEVICES was given its own (srun --gpus-per-task=1, a per-rank wrapper script) and takes
it, whatever its local rank.
"""

from __future__ import annotations

from collections.abc import Mapping

from flywheel.config import ConfigError

LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


class NoGPUForRank(ConfigError):
    """The launch put more ranks on a node than it shows GPUs; the message says how to fix the launch."""


def launcher_local_rank(env: Mapping[str, str]) -> int | None:
    """The node-local rank the launcher set (the first of LOCAL_RANK_VARIABLES present), or None."""
    for name in LOCAL_RANK_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            if not value.isdigit():
                raise ConfigError(f"{name} is {value!r}, not a node-local rank (a whole number >= 0); unset it or let the MPI launcher set it")
            return int(value)
    return None


def local_gpu(env: Mapping[str, str], visible: int, shared_rank: int | None = None) -> int:
    """The CUDA device index (among the ``visible`` ones) of the MPI process whose environment is
    ``env``; ``shared_rank``: its rank among the processes on its node, used when the launcher set
    no local rank. Raises NoGPUForRank when its local rank has no GPU."""
    devices = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if visible == 1 and len(devices) == 1:
        return 0
    local = launcher_local_rank(env)
    if local is None:
        if shared_rank is None:
            raise ValueError(
                "no node-local rank: the launcher set none of " + ", ".join(LOCAL_RANK_VARIABLES) + " and no shared-memory rank was given"
            )
        local = shared_rank
    if local < visible:
        return local
    shown = f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}" if "CUDA_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES unset"
    raise NoGPUForRank(
        f"this MPI process is rank {local} on its node but sees {visible} GPU{'s' * (visible != 1)} ({shown}): start at most {visible} rank{'s' * (visible != 1)} per node (mpirun --map-by ppr:{visible}:node, srun --ntasks-per-node={visible}) or give each rank its own GPU (srun --gpus-per-task=1)"
    )
