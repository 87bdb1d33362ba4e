"""``mpirun -np 2 flywheel train``: two MPI processes are the trainer ranks (rank 0 also runs the
controller and the engine on Ray) and the run equals the same config trained by a 2-rank Ray group."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]
COMMON = ["run.steps=2", "eval.every=2", "run.progress=false", "rollout.prompts_per_step=16", "trainer.threads=1"]
COMPARED = ("reward/mean", "loss/policy", "train/grad_norm", "train/entropy", "eval/accuracy", "weights/version")


def mpirun(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``mpirun -np 2 python -m flywheel.cli train configs/quickstart.yaml *args`` (as root, as CI runs)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
        sys.executable,
        "-m",
        "flywheel.cli",
        "train",
        "configs/quickstart.yaml",
        *args,
    ]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_mpi_ranks_train_like_ray_ranks(fresh_workers, tmp_path):
    launched = mpirun(*COMMON, f"run.output_dir={tmp_path}", "run.name=mpi")
    assert launched.returncode == 0, launched.stderr[-3000:]
    config = load_config(REPO / "configs/quickstart.yaml", [*COMMON, f"run.output_dir={tmp_path}", "run.name=ray", "trainer.ranks=2"])
    ray_run = train(config, fresh_workers(config))

    expected, got = read_metrics(ray_run / "metrics.jsonl"), read_metrics(tmp_path / "mpi" / "metrics.jsonl")
    assert [r["step"] for r in got] == [0, 1, 2]
    for want, have in zip(expected, got):
        for key in COMPARED:
            if key in want:
                assert have[key] == want[key], (want["step"], key, want[key], have[key])
    assert (tmp_path / "mpi" / "final" / "model.safetensors").is_file()


def test_trainer_ranks_other_than_the_mpi_processes_are_refused(tmp_path):
    launched = mpirun("trainer.ranks=3", f"run.output_dir={tmp_path}", timeout=300)
    assert launched.returncode == 2
    assert (
        "flywheel: error: trainer.ranks is 3 but MPI started 2 processes: under mpirun every process is a trainer rank, so leave trainer.ranks at 1 or set it to 2"
        in launched.stderr
    )
    assert not any(tmp_path.iterdir())  # nothing started
