"""A run that can train nothing stops with one sentence, never hangs, through the real CLI (each run starts its
own Ray and engine): a dataset grader that always raises, an environment whose reward is always NaN. Exit
code 5; the sentence gives the share of invalid episodes and the first error; errors/ holds its traceback;
no process of the run is left behind. Each with the groups made in the driver and in a rollout worker.
The first run's dataset also has rows too long for the model's context: they are skipped and said so.
(slow) An engine that never answers: its core process stopped, its replica alive to Ray."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests/faulty_user_code.py"
STALL = ("rollout.max_staleness=0", "algorithm.off_policy=none", "run.progress=false", "rollout.prompts_per_step=4", "rollout.stall_steps=1")


def train(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``flywheel train`` in a session of its own; after it exits, no process of that session (Ray, engines,
    trainer) may be left."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "flywheel.cli", "train", str(REPO / "configs/quickstart.yaml"), *STALL, f"run.output_dir={tmp_path}", *overrides]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stdout, stderr = process.communicate(timeout=400)
    deadline = time.monotonic() + 30
    while session(process.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not session(process.pid), f"left behind: {session(process.pid)}"
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def session(sid: int) -> list[str]:
    """Command lines of the live processes of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.getsid(int(entry.name)) == sid:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120])
        except OSError:  # gone meanwhile
            pass
    return found


@pytest.mark.parametrize("workers", [0, 1], ids=["in_the_driver", "in_a_rollout_worker"])
def test_a_grader_that_always_raises_stops_the_run_with_one_sentence(tmp_path, workers):
    data = tmp_path / "rows.jsonl"
    rows = [{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(100, 120)] + [{"prompt": "1+" * 40 + "1=", "answer": "41"}] * 3
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(row) + "\n" for row in rows[:4]))
    dataset = ("task.name=dataset", "task.env_args={}", f"task.dataset={data}", f"task.eval_dataset={held_out}", "task.eval_size=4")
    dataset += (f"task.grader={FAULTY}:grader_raises",)
    result = train(tmp_path, *dataset, f"rollout.workers={workers}")
    assert result.returncode == 5, result.stderr[-3000:]
    assert (
        "flywheel: skipped 3 train and 0 eval rows of task.dataset whose prompts are longer than the model's context leaves room for (56 tokens"
        in result.stderr
    )
    assert result.stderr.strip().splitlines()[-1] == (
        "flywheel: stopped: no group was trained in the last 4 admitted groups: 100% of their 32 episodes were invalid (first error: env_error: "
        "DatasetEnv.step raised RuntimeError: the grader is broken), 0 groups too stale, 0 uninformative; fix what fails (errors/ in the run "
        "directory holds the first tracebacks) or raise rollout.stall_steps"
    )
    assert "Traceback" not in result.stderr
    first = (tmp_path / "quickstart/errors/env_error-RuntimeError.txt").read_text()  # raised in a worker: its traceback as text
    assert "the grader is broken" in first and 'in grader_raises\n    raise RuntimeError("the grader is broken")' in first


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.slow)], ids=["in_the_driver", "in_a_rollout_worker"])
def test_an_environment_whose_reward_is_always_nan_stops_the_run_with_one_sentence(tmp_path, workers):
    result = train(tmp_path, "task.imports=[faulty_user_code]", "task.name=nan_arithmetic", f"rollout.workers={workers}")
    assert result.returncode == 5, result.stderr[-3000:]
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "flywheel: stopped: no group was trained in the last 4 admitted groups: 100% of their 32 episodes were invalid (first error: "
            "nonfinite_reward: reward nan), 0 groups too stale, 0 uninformative;"
        )
    )
    assert "Traceback" not in result.stderr and (tmp_path / "quickstart/errors/nonfinite_reward.txt").is_file()


@pytest.mark.slow
def test_an_engine_that_never_answers_stops_the_run_with_one_sentence(tmp_path):
    """The engine replica's processes (its actor, engine core and workers) are stopped (SIGSTOP) once the first
    step is logged: the replica stays alive to Ray, its requests and weight loads never return. The run ends
    after rollout.stall_timeout_s with exit 5, and nothing of it is left, the stopped processes included."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    overrides = [*STALL, f"run.output_dir={tmp_path}", "rollout.stall_timeout_s=20", "run.steps=50"]
    command = [sys.executable, "-m", "flywheel.cli", "train", str(REPO / "configs/quickstart.yaml"), *overrides]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    metrics = tmp_path / "quickstart/metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and '"step": 1,' in metrics.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    engine = engine_processes(process.pid)
    assert engine, "no engine process in the run's session:\n" + "\n".join(session(process.pid))
    for pid in engine:
        os.kill(pid, signal.SIGSTOP)
    stdout, stderr = process.communicate(timeout=300)
    deadline = time.monotonic() + 30
    while session(process.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not session(process.pid), f"left behind: {session(process.pid)}"
    assert process.returncode == 5, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]  # no group finished, or the version loading then was never loaded
    assert last.startswith("flywheel: stopped: ") and " in 20 s" in last and "an engine that never answers" in last, stderr[-3000:]


def engine_processes(sid: int) -> list[int]:
    """The engine replica's processes in session ``sid``: its Ray actor (``ray::VLLMEngine``), vLLM's engine
    core and their children."""
    parents, roots = {}, []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.getsid(int(entry.name)) != sid:
                continue
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):  # gone meanwhile
            continue
        if command.startswith(b"ray::VLLMEngine") or b"EngineCore" in command:
            roots.append(int(entry.name))
    tree, added = set(roots), True
    while added:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree, added = tree | children, bool(children)
    return sorted(tree)
