"""On-policy distillation through the real loop: the teacher on an engine of its own (started and stopped with
the run), asked for the student's tokens every step. With the student's own initial model as the teacher, a
synchronous first step's reverse KL is zero to float precision: the teacher's prefill and the student's
sampling logprobs line up token for token."""

import json
import os
import time
from pathlib import Path

from helpers import SYNC, actor_processes

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]


def test_the_teacher_scores_every_step_and_is_stopped_with_the_run(fresh_workers, tmp_path):
    overrides = [*SYNC, "algorithm.name=distill", f"algorithm.teacher={REPO / 'assets/tiny-adder'}", "run.steps=2", "eval.every=2"]
    config = load_config(REPO / "configs/quickstart.yaml", [*overrides, f"run.output_dir={tmp_path}", "run.progress=false"])
    workers = fresh_workers(config)
    engines = len(actor_processes(os.getpid(), "ray::VLLMEngine"))
    run_dir = train(config, workers)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert abs(rows[1]["distill/reverse_kl"]) < 1e-4, rows[1]  # the same weights on both engines
    assert "distill/reverse_kl" in rows[2] and rows[2]["loss/policy"] == rows[2]["loss/policy"]
    deadline = time.monotonic() + 30
    while len(actor_processes(os.getpid(), "ray::VLLMEngine")) > engines and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(actor_processes(os.getpid(), "ray::VLLMEngine")) == engines  # the teacher's engine is gone
