"""``mpirun -np 2 flywheel train``: two MPI processes are the trainer ranks (rank 0 also runs the
controller and the engine on Ray) and the run equals the same config trained by a 2-rank Ray group; an
engine killed under it is replaced and rejoins the collective weight group."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SYNC, actor_processes

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]
COMMON = ["run.steps=2", "eval.every=2", "run.progress=false", "rollout.prompts_per_step=16", "trainer.threads=1"]
COMPARED = ("reward/mean", "loss/policy", "train/grad_norm", "train/entropy", "eval/accuracy", "weights/version")


def mpirun_command(*args: str) -> list[str]:
    """``mpirun -np 2 python -m flywheel.cli train configs/quickstart.yaml *args`` (as root, as CI runs)."""
    return [
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
        *SYNC,
        *args,
    ]


ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def mpirun(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(mpirun_command(*args), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_mpi_ranks_train_like_ray_ranks(fresh_workers, tmp_path):
    launched = mpirun(*COMMON, f"run.output_dir={tmp_path}", "run.name=mpi")
    assert launched.returncode == 0, launched.stderr[-3000:]
    config = load_config(REPO / "configs/quickstart.yaml", [*SYNC, *COMMON, f"run.output_dir={tmp_path}", "run.name=ray", "trainer.ranks=2"])
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


@pytest.mark.slow
def test_an_engine_killed_under_mpirun_is_replaced_and_rejoins_the_collective_group(tmp_path):
    """The run's lone engine is SIGKILLed after step 2 of an ``mpirun -np 2`` run over
    weights.name=collective: trainer rank 0 (an MPI process, not a Ray actor) re-forms the weight
    group with the replacement, which loads the current version before it serves; the run ends every
    step, each admitted prompt ends exactly once, and every trained token carries its step's version."""
    steps = 5
    args = [*COMMON, f"run.steps={steps}", "eval.every=100", "run.dump_rollouts=true", "weights.name=collective", "rollout.max_staleness=0"]
    log = tmp_path / "mpirun.log"
    with log.open("w") as out:
        run = subprocess.Popen(
            mpirun_command(*args, f"run.output_dir={tmp_path}", "run.name=mpi"), cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT
        )
    run_dir = tmp_path / "mpi"
    try:
        deadline = time.monotonic() + 600
        while not ((run_dir / "metrics.jsonl").is_file() and len((run_dir / "metrics.jsonl").read_text().splitlines()) >= 3):  # step 2 done
            assert run.poll() is None and time.monotonic() < deadline, f"the run ended or stalled before step 2: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        [engine] = actor_processes(run.pid, "ray::VLLMEngine")
        engine.kill()
        assert run.wait(timeout=900) == 0, log.read_text()[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    text = log.read_text()
    assert "engine replica 0 died at weights version" in text, text[-3000:]
    assert "weight group re-formed with engine replicas [0]" in text, text[-3000:]
    assert "engine replica 0 is back, serving weights version" in text, text[-3000:]

    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(steps + 1))
    assert metrics[-1]["engines/restarts"] == 1
    assert metrics[-1]["engines/live"] == 1
    rows = [json.loads(line) for line in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    positions = sorted(row["position"] for row in rows)
    assert positions == list(range(len(positions))), "an admitted prompt was lost or duplicated"
    trained = [row for row in rows if row["fate"] == "trained"]
    assert len(trained) == steps * 16
    for row in trained:  # synchronous: the replacement served the version the step trained on
        assert set(sum(row["weight_versions"], [])) == {row["trainer_version"]}, row["position"]
