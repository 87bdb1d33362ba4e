"""The GPU an MPI trainer rank takes: its node-local rank (from the launcher, else MPI's shared-memory
split) among the GPUs CUDA_VISIBLE_DEVICES leaves visible; one sentence when that GPU does not exist."""

import pytest

from flywheel.cluster.local_gpu import NoGPUForRank, launcher_local_rank, local_gpu
from flywheel.config import ConfigError


@pytest.mark.parametrize(
    ("env", "local"),
    [
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_RANK": "11"}, 3),  # Open MPI: the 4th process on the node
        ({"MPI_LOCALRANKID": "2", "PMI_RANK": "6"}, 2),  # MPICH / Intel MPI (Hydra)
        ({"SLURM_LOCALID": "1", "SLURM_PROCID": "9"}, 1),  # srun
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "0", "SLURM_LOCALID": "5"}, 0),  # mpirun inside a Slurm allocation: the launcher's own
        ({"PMI_RANK": "4"}, None),  # none set: the caller splits MPI_COMM_WORLD by node
        ({"SLURM_LOCALID": " "}, None),
    ],
)
def test_the_launcher_local_rank(env, local):
    assert launcher_local_rank(env) == local


def test_a_local_rank_that_is_not_a_number_is_one_sentence():
    with pytest.raises(ConfigError, match=r"^OMPI_COMM_WORLD_LOCAL_RANK is 'one', not a node-local rank \(a whole number >= 0\); unset it"):
        launcher_local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "one"})


@pytest.mark.parametrize(
    ("env", "visible", "shared", "device"),
    [
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "0"}, 8, None, 0),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "7"}, 8, None, 7),  # 8 ranks on an 8-GPU node: one each
        ({"MPI_LOCALRANKID": "1", "CUDA_VISIBLE_DEVICES": "4,5"}, 2, None, 1),  # index among the visible: physical GPU 5
        ({"SLURM_LOCALID": "3", "CUDA_VISIBLE_DEVICES": "3"}, 1, None, 0),  # srun --gpus-per-task=1: the one it was given
        ({"SLURM_LOCALID": "3", "CUDA_VISIBLE_DEVICES": "GPU-8f2a"}, 1, None, 0),  # a UUID names one device too
        ({"PMI_RANK": "5"}, 4, 2, 2),  # no launcher local rank: the shared-memory split's rank
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, 4, 3, 1),  # the launcher's rank wins over the split
    ],
)
def test_the_rank_takes_its_local_gpu(env, visible, shared, device):
    assert local_gpu(env, visible, shared) == device


def test_a_local_rank_beyond_the_visible_gpus_is_one_sentence():
    with pytest.raises(NoGPUForRank) as error:
        local_gpu({"OMPI_COMM_WORLD_LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "0,1"}, 2)
    assert str(error.value) == (
        "this MPI process is rank 2 on its node but sees 2 GPUs (CUDA_VISIBLE_DEVICES=0,1): start at most 2 ranks per node "
        "(mpirun --map-by ppr:2:node, srun --ntasks-per-node=2) or give each rank its own GPU (srun --gpus-per-task=1)"
    )
    assert isinstance(error.value, ConfigError)  # printed as one line by the CLI, the job aborted


def test_two_ranks_on_a_node_with_one_gpu_and_no_binding_is_an_error():
    with pytest.raises(
        NoGPUForRank, match=r"^this MPI process is rank 1 on its node but sees 1 GPU \(CUDA_VISIBLE_DEVICES unset\): start at most 1 rank per node"
    ):
        local_gpu({"SLURM_LOCALID": "1"}, 1)


def test_without_any_local_rank_the_caller_must_give_the_split():
    with pytest.raises(ValueError, match="no node-local rank"):
        local_gpu({}, 2)
