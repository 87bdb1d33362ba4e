"""A trainer rank whose process dies mid-run: without the supervisor the run ends with exit code 4
and one sentence naming the rank, the step and the checkpoint; with it, the run resumes from that
checkpoint in the same run directory and its steps after the restart equal those of an
uninterrupted run."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray
from helpers import SYNC, actor_processes, crashing_engine
from ray._private.state import actors as actor_table  # the GCS's actor table; the state API needs the dashboard

from flywheel.cluster.workers import engine_spec
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.engines.remote import RemoteEngine
from flywheel.monitor.metrics import read_metrics
from flywheel.supervisor import supervise
from flywheel.trainer.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]
COMPARED = ("reward/mean", "loss/policy", "train/grad_norm", "train/entropy", "eval/accuracy", "weights/version")


def dying_trainer(marker: Path, step: int, rank: int = 1) -> type[Trainer]:
    """Rank ``rank``'s process exits in the middle of training step ``step``, once: it leaves ``marker``
    behind, so the restarted group trains on. Defined here so that Ray ships it by value."""

    class DyingTrainer(Trainer):
        def train_step(self, parts):
            if self.rank == rank and self.version == step - 1 and not marker.exists():
                marker.touch()
                os._exit(1)  # rank 0 is in the step's first collective with it
            return super().train_step(parts)

    return DyingTrainer


COMMON = ["run.progress=false", "rollout.prompts_per_step=16"]


def run_config(tmp_path: Path, *extra: str):
    steps = ["run.steps=4", "run.checkpoint_every=2", "eval.every=2"]
    return load_config(
        REPO / "configs/quickstart.yaml", [*SYNC, *COMMON, *steps, "trainer.ranks=2", "trainer.threads=1", f"run.output_dir={tmp_path}", *extra]
    )


def test_a_rank_killed_from_outside_ends_the_cli_run_with_exit_4(tmp_path):
    """SIGKILL to one rank of a 2-rank CLI run: the other may be blocked in a collective with it, yet the
    run ends at once with exit code 4 and one sentence, leaving no trainer process behind."""
    args = [
        *COMMON,
        "run.steps=200",
        "run.checkpoint_every=1",
        "eval.every=200",
        "trainer.ranks=2",
        "trainer.threads=1",
        f"run.output_dir={tmp_path}",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = subprocess.Popen(
        [sys.executable, "-m", "flywheel.cli", "train", "configs/quickstart.yaml", *SYNC, *args], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True
    )
    metrics = tmp_path / "quickstart" / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= 3):  # step 2 done
        assert run.poll() is None and time.monotonic() < deadline, "the run ended or stalled before step 2"
        time.sleep(0.5)
    ranks = actor_processes(run.pid, "ray::Trainer")
    assert len(ranks) == 2
    ranks[1].kill()
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 4, stderr[-2000:]
    run_dir = tmp_path / "quickstart"
    [line] = [line for line in stderr.splitlines() if line.startswith("flywheel: stopped:")]
    found = re.fullmatch(
        rf"flywheel: stopped: trainer rank [01] died at step (\d+) \(during \w+\); its latest checkpoint is {run_dir}/checkpoints/step_(\d+): continue with run.resume={run_dir}",
        line,
    )
    assert found, line
    assert int(found[2]) == int(found[1]) - 1  # a checkpoint every step
    assert not [p for p in ranks if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_the_supervisor_resumes_exactly_after_a_rank_dies(shared_engine, fresh_workers, tmp_path):
    supervised = supervise(
        run_config(tmp_path, "run.name=supervised", "run.supervise=true", "run.max_restarts=1"), [shared_engine], dying_trainer(tmp_path / "died", 3)
    )
    [restart] = (supervised / "restarts.log").read_text().splitlines()
    assert restart.endswith(
        f"restart 1 of 1: trainer rank 1 died at step 3 (during train_step); its latest checkpoint is {supervised / 'checkpoints/step_2'}: continue with run.resume={supervised}"
    )
    whole = train(run_config(tmp_path, "run.name=whole"), fresh_workers(run_config(tmp_path)))

    expected, got = read_metrics(whole / "metrics.jsonl"), read_metrics(supervised / "metrics.jsonl")
    assert [r["step"] for r in got] == [0, 1, 2, 3, 4]
    for want, have in zip(expected[3:], got[3:]):
        for key in COMPARED:
            if key in want:
                assert have[key] == want[key], (want["step"], key, want[key], have[key])


def engine_states(before: set[str]) -> dict[str, str]:
    """Actor id -> state of the VLLMEngine actors (replacement replicas) not among ``before``."""
    return {a["ActorID"]: a["State"] for a in actor_table().values() if a["ActorClassName"] == "VLLMEngine" and a["ActorID"] not in before}


@pytest.mark.slow
def test_the_next_attempt_is_served_by_the_replacement_replica(shared_engine, tmp_path, capsys):
    """The run's only replica dies at step 3 and the router replaces it; the trainer dies in step 3's
    training. The second attempt (from the step-2 checkpoint) is served by that replacement: no replica is
    started again for the same death, the restart count carries over, and the replacement, alive
    during the second attempt, is stopped when the supervisor ends."""
    steps = [
        "run.steps=3",
        "run.checkpoint_every=2",
        "eval.every=100",
        "task.eval_size=16",
        "rollout.prompts_per_step=8",
        "rollout.max_engine_restarts=1",
    ]
    config = load_config(
        REPO / "configs/quickstart.yaml", [*SYNC, *COMMON, *steps, "run.supervise=true", "run.max_restarts=1", f"run.output_dir={tmp_path}"]
    )
    run_dir = tmp_path / "quickstart"
    crashing = ray.remote(crashing_engine()).options(num_cpus=0.5, max_restarts=0).remote(engine_spec(config))
    ray.get(crashing.__ray_ready__.remote())
    before = set(engine_states(set()))
    seen_in_attempt_2: dict[str, set[str]] = {}
    done = threading.Event()

    def watch() -> None:  # the replacements' states while the second attempt runs
        while not done.wait(0.5):
            if (run_dir / "restarts.log").is_file():
                for actor, state in engine_states(before).items():
                    seen_in_attempt_2.setdefault(actor, set()).add(state)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        supervised = supervise(config, [RemoteEngine(crashing)], dying_trainer(tmp_path / "died", 3, rank=0))
    finally:
        done.set()
        watcher.join()
        ray.kill(crashing)

    [restart] = (supervised / "restarts.log").read_text().splitlines()
    assert "restart 1 of 1: trainer rank 0 died at step 3 (during train_step)" in restart
    said = capsys.readouterr().err  # the run's console
    assert said.count("engine replica 0 died") == 1, said
    assert "engine replica 0 died at weights version 2; restarting it (1 of 1 restarts)" in said
    [replacement] = engine_states(before)  # one replacement in the whole run
    assert seen_in_attempt_2[replacement] == {"ALIVE"}
    assert engine_states(before)[replacement] == "DEAD"  # stopped by the supervisor
    metrics = read_metrics(supervised / "metrics.jsonl")
    assert [r["step"] for r in metrics] == [0, 1, 2, 3]
    assert (metrics[3]["engines/restarts"], metrics[3]["engines/live"]) == (1, 1)  # the count carried over
