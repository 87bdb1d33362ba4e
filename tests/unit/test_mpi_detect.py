"""Which environments mean "started by an MPI launcher as one of several processes"."""

import pytest

from flywheel.cluster.mpi import launched_by_mpi

LAUNCH_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS")


@pytest.mark.parametrize(
    "env, launched",
    [
        ({}, False),
        ({"OMPI_COMM_WORLD_SIZE": "2"}, True),
        ({"OMPI_COMM_WORLD_SIZE": "1"}, False),  # mpirun -np 1: a plain run
        ({"PMI_SIZE": "4"}, True),  # MPICH / Intel MPI mpiexec, srun --mpi=pmi2
        ({"PMIX_RANK": "0", "SLURM_STEP_NUM_TASKS": "2"}, True),  # srun --mpi=pmix
        ({"SLURM_STEP_NUM_TASKS": "2"}, False),  # srun without MPI: not a launch of ranks
    ],
)
def test_launched_by_mpi(monkeypatch, env, launched):
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert launched_by_mpi() is launched
