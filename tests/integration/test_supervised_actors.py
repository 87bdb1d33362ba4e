"""A supervised run (run.supervise=true) builds its actors as a plain run does (cluster/workers.py): an
asynchronous run on this machine keeps the engines and the trainer on separate halves of its cores, a
restarted trainer included; a disaggregated run places its trainer first and keeps the engines off its
node."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest
import ray
import yaml
from ray._private.state import actors as actor_table  # the GCS's actor table; the state API needs the dashboard

from flywheel.cluster.cores import as_cpu_list, halves
from flywheel.config import load_config
from flywheel.monitor.metrics import read_metrics
from flywheel.supervisor import supervise
from flywheel.trainer.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]


def recording_trainer(out: Path, die_at: int) -> type[Trainer]:
    """Each rank process writes its cores and torch threads to ``out``/<pid>.json once built; the first
    one dies in training step ``die_at``. Defined here so that Ray ships it by value."""

    class RecordingTrainer(Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            import torch

            (out / f"{os.getpid()}.json").write_text(json.dumps({"cores": sorted(os.sched_getaffinity(0)), "threads": torch.get_num_threads()}))

        def train_step(self, parts):
            if self.version == die_at - 1 and not (out / "died").exists():
                (out / "died").touch()
                os._exit(1)
            return super().train_step(parts)

    return RecordingTrainer


def engine_cores(before: set[str]) -> dict[int, list[int]]:
    """PID -> cores of the processes every live engine replica not among ``before`` (actor ids) started:
    vLLM's engine core, where generation computes. (The replica's own process binds the thread that builds
    the engine, not its main thread, which psutil reads.)"""
    found = {}
    for actor in actor_table().values():
        if actor["ActorClassName"] == "VLLMEngine" and actor["State"] == "ALIVE" and actor["Pid"] and actor["ActorID"] not in before:
            with contextlib.suppress(psutil.Error):
                for p in psutil.Process(actor["Pid"]).children(recursive=True):
                    found[p.pid] = sorted(p.cpu_affinity())
    return found


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a core split needs two cores")
def test_a_supervised_asynchronous_run_keeps_the_core_split_across_a_restart(tmp_path):
    """The shipped quickstart (asynchronous) supervised, its trainer dying in step 2: the engine's processes
    run on the first half of this process's cores, both trainer processes (before and after the restart)
    on the other half with the thread count the split gives, and the run records the split config."""
    out = tmp_path / "trainers"
    out.mkdir()
    overrides = ["run.supervise=true", "run.max_restarts=1", "run.steps=3", "run.checkpoint_every=1", "eval.every=3", "run.progress=false"]
    config = load_config(REPO / "configs/quickstart.yaml", [*overrides, "rollout.prompts_per_step=16", f"run.output_dir={tmp_path}"])
    assert config.rollout.max_staleness > 0 and config.engine.cpu_bind == "auto" and config.trainer.cpu_affinity is None
    before = set(actor_table()) if ray.is_initialized() else set()  # the session's shared engine, if up
    seen: dict[int, list[int]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            with contextlib.suppress(Exception):  # Ray may not be up yet, or down already
                seen.update(engine_cores(before))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run_dir = supervise(config, trainer_class=recording_trainer(out, die_at=2))
    finally:
        done.set()
        watcher.join()

    engine_half, trainer_half = halves(os.sched_getaffinity(0))
    assert (run_dir / "restarts.log").read_text().count("restart 1 of 1: trainer rank 0 died at step 2") == 1
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if "reward/mean" in r] == [1, 2, 3]
    trainers = [json.loads(p.read_text()) for p in out.glob("*.json")]
    threads = min(config.trainer.threads, len(trainer_half))
    assert trainers == [{"cores": trainer_half, "threads": threads}] * 2  # the first group and the restarted one
    assert seen and set(map(tuple, seen.values())) == {tuple(engine_half)}, seen  # vLLM's engine core
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert recorded["engine"]["cpu_bind"] == as_cpu_list(engine_half) and recorded["trainer"]["cpu_affinity"] == trainer_half


PLACED = """
import json, os, sys, threading, time
import ray
from ray._private.state import actors, state
from ray.core.generated import gcs_pb2
from flywheel.config import load_config
from flywheel.supervisor import supervise

ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="error", _temp_dir=sys.argv[1])

def watch():
    while True:
        table = [gcs_pb2.ActorTableData.FromString(raw) for raw in state._global_state_accessor.get_actor_table(None, None)]
        engines = [dict(a.label_selector) for a in table if a.class_name == "VLLMEngine"]
        trainers = [a["Address"]["NodeID"] for a in actors().values() if a["ActorClassName"] == "Trainer" and a["State"] == "ALIVE"]
        if engines and trainers:
            print(json.dumps({"engine_selectors": engines, "trainer_nodes": trainers, "nodes": [n["NodeID"] for n in ray.nodes()]}), flush=True)
            return
        time.sleep(0.5)

threading.Thread(target=watch, daemon=True).start()
supervise(load_config("configs/quickstart.yaml", sys.argv[2:]))
"""


def test_a_supervised_disaggregated_run_places_the_trainer_first_and_its_engines_off_its_node(tmp_path):
    """On this machine's one Ray node: the supervised run starts its trainer, then asks for its engine
    replica on any node but the trainer's (so none here: the replica waits, and the script is stopped)."""
    temp_dir = tempfile.mkdtemp(prefix="fwsp-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    overrides = ["run.supervise=true", "cluster.address=auto", "cluster.placement=disaggregated", f"run.output_dir={tmp_path}", "run.progress=false"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "RAY_worker_niceness": "0"}
    script = subprocess.Popen(
        [sys.executable, "-c", PLACED, temp_dir, *overrides],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("w"),
        text=True,
        start_new_session=True,
    )
    try:
        line = script.stdout.readline()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.pid, signal.SIGKILL)
        script.wait(timeout=60)
        for process in psutil.process_iter(["cmdline"]):  # the script's Ray (its session paths are in their arguments)
            if any(temp_dir in arg for arg in process.info["cmdline"] or ()):
                with contextlib.suppress(psutil.Error):
                    process.kill()
    assert line, (tmp_path / "stderr.txt").read_text()[-3000:]
    placed = json.loads(line)
    [node] = placed["nodes"]
    assert placed["trainer_nodes"] == [node]
    assert placed["engine_selectors"] == [{"ray.io/node-id": f"!{node}"}]  # Ray's form of !in(<node>)
