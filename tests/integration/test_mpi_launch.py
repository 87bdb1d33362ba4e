"""``mpirun -np 2 flywheel train``: two MPI processes are the trainer ranks (rank 0 also runs the
controller and the engine on Ray) and the run equals the same config trained by a 2-rank Ray group; an
engine killed under it is replaced and rejoins the collective weight group."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
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


@pytest.mark.slow
def test_stop_signals_under_mpirun_checkpoint_with_every_rank_and_exit_6(tmp_path):
    """SIGUSR1 to mpirun (which forwards it to every rank at once, as for ``sbatch --signal=USR1@T``)
    after step 2: rank 0 stops at the step boundary, saves the checkpoint with rank 1 and releases it;
    mpirun exits 6 with rank 0's one line, and no process of the launch is left. Resumed under mpirun
    from that checkpoint, SIGTERM to each rank (what srun sends to every task) stops it the same way,
    later."""
    args = [*COMMON, "run.steps=40", "eval.every=100", "run.checkpoint_every=100", f"run.output_dir={tmp_path}", "run.name=mpi"]
    run_dir = tmp_path / "mpi"

    first = stop_after(mpirun_command(*args), run_dir / "metrics.jsonl", 2, lambda run: run.send_signal(signal.SIGUSR1))
    stopped = re.search(
        r"flywheel: stopped: SIGUSR1 stopped the run at a step boundary after step (\d+); checkpoint (\S+): continue with run.resume=", first
    )
    assert stopped, first[-3000:]
    assert int(stopped[1]) >= 2 and Path(stopped[2]) == run_dir / f"checkpoints/step_{stopped[1]}", first[-3000:]

    def sigterm_each_rank(run: subprocess.Popen) -> None:
        ranks = [p for p in psutil.Process(run.pid).children() if "flywheel.cli" in " ".join(p.cmdline())]
        assert len(ranks) == 2, ranks
        for rank in ranks:
            rank.terminate()

    resumed_from = int(stopped[1])
    second = stop_after(mpirun_command(*args, f"run.resume={run_dir}"), run_dir / "metrics.jsonl", resumed_from + 1, sigterm_each_rank)
    stopped = re.search(r"flywheel: stopped: SIGTERM stopped the run at a step boundary after step (\d+); checkpoint (\S+):", second)
    assert stopped and int(stopped[1]) > resumed_from and Path(stopped[2]).is_dir(), second[-3000:]
    steps = [row["step"] for row in read_metrics(run_dir / "metrics.jsonl")]
    assert steps == list(range(int(stopped[1]) + 1)), steps  # the resumed run continued where the checkpoint was


def stop_after(command: list[str], metrics: Path, step: int, send) -> str:
    """Starts ``command`` in a session of its own, calls ``send(process)`` once ``metrics`` has the row of
    ``step``, and returns its output; asserts exit code 6 within 120 s and no process of the session left."""
    run = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not any(row["step"] >= step for row in rows_written(metrics)):
            assert run.poll() is None and time.monotonic() < deadline, f"the run ended or stalled before step {step}: {run.stdout.read()[-3000:]}"
            time.sleep(0.5)
        send(run)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 6, output[-3000:]
    deadline = time.monotonic() + 10
    while in_session(run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not in_session(run.pid), in_session(run.pid)
    return output


def in_session(sid: int) -> list[str]:
    """The live processes of session ``sid``: their command lines."""
    found = []
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(process.cmdline())[:120])
    return found


def rows_written(metrics: Path) -> list[dict]:
    """The rows of ``metrics`` written so far (none before it exists; a line being written is left out)."""
    rows = []
    for line in metrics.read_text().splitlines() if metrics.is_file() else []:
        with contextlib.suppress(ValueError):
            rows.append(json.loads(line))
    return rows
