"""Preemption through the CLI with real signals: Ctrl-C (SIGINT to the process group), SIGTERM to the
driver, a second signal. Each stop ends with exit code 6, one line naming the checkpoint of the last
step done, within run.stop_timeout_s, and no process of the run's session left; resumed from those
checkpoints the run reproduces the uninterrupted run (the golden file of test_golden.py's config)."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from helpers import SYNC, assert_matches_golden

REPO = Path(__file__).resolve().parents[2]
STEPS = 8
# test_golden.py's config (its numbers are the uninterrupted run), no scheduled checkpoint, every group's fate dumped
ARGS = [*SYNC, "eval.every=100", "eval.greedy=false", "run.progress=false", "run.checkpoint_every=100", "run.dump_rollouts=true"]
STOP_TIMEOUT_S = 60


def session_processes(sid: int) -> list[int]:
    """The processes of session ``sid`` (the driver's, started with a session of its own), zombies left out."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [
        str(REPO / ".venv/bin/flywheel"),
        "train",
        "configs/quickstart.yaml",
        *ARGS,
        f"run.steps={STEPS}",
        f"run.output_dir={tmp_path}",
        *extra,
    ]
    return subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)


def rows_logged(run_dir: Path) -> set[tuple[int, float]]:
    """(step, timing/elapsed_s) of metrics.jsonl's step rows: the elapsed time tells one attempt's rows from another's."""
    metrics, rows = run_dir / "metrics.jsonl", []
    for line in metrics.read_text().splitlines() if metrics.is_file() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line being written
            continue
    return {(r["step"], r["timing/elapsed_s"]) for r in rows if "timing/elapsed_s" in r}


def stop(run: subprocess.Popen, run_dir: Path, after_step: int, send) -> tuple[str, int]:
    """Waits for this attempt's row of ``after_step``, calls ``send`` (the signals), then for the exit:
    (stderr, the number of the session's processes when the signal went). Asserts exit code 6 within
    the stop timeout and no process of the session left."""
    earlier, deadline = rows_logged(run_dir), time.monotonic() + 600
    while not any(step >= after_step for step, _ in rows_logged(run_dir) - earlier):
        assert run.poll() is None and time.monotonic() < deadline, f"the run ended or stalled before step {after_step}: {run.stderr.read()[-2000:]}"
        time.sleep(0.2)
    running = len(session_processes(run.pid))
    send()
    _, stderr = run.communicate(timeout=STOP_TIMEOUT_S)
    assert run.returncode == 6, stderr[-3000:]
    deadline = time.monotonic() + 10  # the processes the driver stopped are reaped by init
    while session_processes(run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(run.pid) == []
    return stderr, running


def stopped_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("flywheel: stopped")]
    return line


def test_signals_stop_the_run_resumably_and_the_resume_is_exact(tmp_path):
    run_dir = tmp_path / "quickstart"

    # Ctrl-C (SIGINT to the process group): the step in flight ends or is abandoned, the last step done is checkpointed
    run = start(tmp_path)
    stderr, running = stop(run, run_dir, 2, lambda: os.killpg(run.pid, signal.SIGINT))
    assert running > 5  # the driver, Ray's processes, the trainer and engine actors, the engine's own process
    found = re.fullmatch(
        rf"flywheel: stopped: SIGINT stopped the run at a step boundary after step (\d+); checkpoint {run_dir}/checkpoints/step_(\d+): "
        rf"continue with run.resume={run_dir}",
        stopped_line(stderr),
    )
    assert found and found[1] == found[2] and int(found[1]) >= 2, stopped_line(stderr)
    first = int(found[1])

    # SIGTERM to the driver (what Kubernetes and Slurm send; Ray's own handler aborted the process), twice:
    # the second stops at once, whatever this attempt was writing
    run = start(tmp_path, f"run.resume={run_dir}")

    def sigterm_twice() -> None:
        os.kill(run.pid, signal.SIGTERM)
        time.sleep(0.05)
        os.kill(run.pid, signal.SIGTERM)

    stderr, _ = stop(run, run_dir, first + 2, sigterm_twice)
    assert "at once" in stopped_line(stderr), stopped_line(stderr)

    # resumed from the newest complete checkpoint, the run ends as the uninterrupted one did
    resumed = start(tmp_path, f"run.resume={run_dir}")
    _, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(STEPS + 1))
    assert_matches_golden(rows[1:])
    # every prompt trained exactly once over the three attempts
    trained = [r["position"] for r in map(json.loads, (run_dir / "rollouts.jsonl").read_text().splitlines()) if r["fate"] == "trained"]
    prompts = 64  # configs/quickstart.yaml's rollout.prompts_per_step
    assert sorted(trained) == list(range(STEPS * prompts))
