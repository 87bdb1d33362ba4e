"""Rollout workers (rollout.workers) through the real CLI: two workers make the groups of a synchronous
quickstart, one is killed with SIGKILL after step 3, and the run still reproduces the golden numbers
(the groups it held run again with the same seeds), restarts it once, and ends every admitted prompt
exactly once in rollouts.jsonl. No process of the run is left behind. A judge on the policy's engines
scores in the workers, on the replica that made the group; a judge on an engine of its own scores there too,
and outlives that engine's death."""

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
from helpers import SYNC, assert_matches_golden
from test_no_progress import session
from tiny_models import save_causal_lm

REPO = Path(__file__).resolve().parents[2]
STEPS = 8

pytestmark = pytest.mark.slow


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def rollout_workers(sid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if (process.info["cmdline"] or [""])[0].startswith("ray::RolloutWorker") and os.getsid(process.pid) == sid:
                found.append(process)
        except (psutil.Error, OSError):
            pass
    return found


def cli(overrides: list[str], tmp_path: Path) -> list[str]:
    return [sys.executable, "-m", "flywheel.cli", "train", str(REPO / "configs/quickstart.yaml"), *overrides, f"run.output_dir={tmp_path}"]


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}


def test_a_killed_rollout_worker_is_restarted_and_the_run_reproduces_the_golden_numbers(tmp_path):
    overrides = [*SYNC, f"run.steps={STEPS}", "eval.every=100", "eval.greedy=false", "run.progress=false", "run.dump_rollouts=true"]
    log = tmp_path / "driver.log"
    driver = subprocess.Popen(
        cli([*overrides, "rollout.workers=2"], tmp_path), cwd=REPO, env=ENV, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    metrics = tmp_path / "quickstart/metrics.jsonl"
    try:
        deadline = time.monotonic() + 400
        while len(read_jsonl(metrics)) < 4 and driver.poll() is None:  # the step-0 eval row, then steps 1..3
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        workers = rollout_workers(driver.pid)
        assert len(workers) == 2, (workers, log.read_text()[-3000:])
        workers[0].send_signal(signal.SIGKILL)
        assert driver.wait(timeout=400) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while session(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not session(driver.pid), f"left behind: {session(driver.pid)}"

    rows = read_jsonl(metrics)[1:]
    assert_matches_golden(rows)
    assert [r["rollout/worker_restarts"] for r in rows][:3] == [0, 0, 0] and rows[-1]["rollout/worker_restarts"] == 1
    assert re.search(r"rollout worker [01] died; restarted it \(1 restarts\), its groups run again", log.read_text())
    dumped = read_jsonl(tmp_path / "quickstart/rollouts.jsonl")
    positions = sorted(row["position"] for row in dumped)
    assert positions == list(range(len(positions))), "an admitted prompt was lost or duplicated"
    assert {row["fate"] for row in dumped} <= {"trained", "pending"}
    assert sum(row["fate"] == "trained" for row in dumped) == STEPS * 64  # a row a group, 64 a step


def test_a_judge_on_the_policy_s_engines_scores_in_the_workers(tmp_path):
    """reward.judge.engine=policy with a rollout worker: the worker's judge asks the replica that made the
    group. The policy is a tiny random model with room for the judge's prompt, its verdicts cut at 8 tokens
    inside the verdict's schema: they never parse, score 0 and are counted, and each took an engine call."""
    model = save_causal_lm(tmp_path / "policy")
    overrides = [*SYNC, "run.steps=2", "rollout.prompts_per_step=8", "eval.every=100", "eval.greedy=false", "run.progress=false"]
    overrides += [f"model.path={model}", "rollout.workers=1", "reward.judge.enabled=true", "reward.judge.engine=policy"]
    overrides += ["reward.judge.max_tokens=8", "reward.judge.weight=0.25"]
    done = subprocess.run(cli(overrides, tmp_path), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = read_jsonl(tmp_path / "quickstart/metrics.jsonl")[1:]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["judge/parse_fail_rate"] == 1.0 and row["reward/judge/mean"] == 0.0 and row["judge/latency_s"] > 0, row


def engine_trees(sid: int) -> list[list[psutil.Process]]:
    """Each vLLM engine actor of session ``sid`` with its processes (engine core, workers), the actor whose engine
    core started last (the judge's own engine starts after the policy's) last."""
    trees = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if (process.info["cmdline"] or [""])[0].startswith("ray::VLLMEngine") and os.getsid(process.pid) == sid:
                children = process.children(recursive=True)
                started = max((c.create_time() for c in children), default=0.0)
                trees.append((started, [process, *children]))
        except (psutil.Error, OSError):
            pass
    return [tree for _, tree in sorted(trees, key=lambda t: t[0])]


def test_a_judge_on_an_engine_of_its_own_scores_in_the_workers_and_outlives_its_engine(tmp_path):
    """reward.judge.engine=own with a rollout worker: the worker's judge calls the judge's own engine. That engine
    is killed (its actor and processes) after step 2: the driver's judge router restarts it and the worker's judge
    calls the replacement, so every step after the kill still has judge calls, each taking an engine call."""
    judge = save_causal_lm(tmp_path / "judge")
    overrides = [*SYNC, "run.steps=5", "rollout.prompts_per_step=8", "eval.every=100", "eval.greedy=false", "run.progress=false"]
    overrides += ["rollout.workers=1", "reward.judge.enabled=true", "reward.judge.engine=own", f"reward.judge.model_path={judge}"]
    overrides += ["reward.judge.max_tokens=8", "reward.judge.weight=0.25"]
    log = tmp_path / "driver.log"
    driver = subprocess.Popen(cli(overrides, tmp_path), cwd=REPO, env=ENV, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    metrics = tmp_path / "quickstart/metrics.jsonl"
    try:
        deadline = time.monotonic() + 400
        while len(read_jsonl(metrics)) < 3 and driver.poll() is None:  # the step-0 eval row, then steps 1..2
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        trees = engine_trees(driver.pid)
        assert len(trees) == 2, (trees, log.read_text()[-3000:])  # the policy's engine, the judge's
        for process in trees[-1]:
            process.send_signal(signal.SIGKILL)
        killed_after = len(read_jsonl(metrics)) - 1  # steps done when the judge's engine died
        assert driver.wait(timeout=400) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    rows = read_jsonl(metrics)[1:]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and killed_after < 5
    for row in rows:
        assert row["judge/parse_fail_rate"] == 1.0 and row["reward/judge/mean"] == 0.0 and row["judge/latency_s"] > 0, row
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in trees[-1])
