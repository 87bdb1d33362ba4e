"""(slow) The docs' algorithm of one's own (examples/opo.py) trains the quickstart through the real CLI, imported
from outside the package by ``algorithm.imports``: in the driver, and in the trainer's Ray actor, which builds
it from the config as it builds a built-in one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_example_algorithm_trains_the_quickstart(tmp_path):
    steps = 10
    args = [
        "train", str(REPO / "configs/quickstart.yaml"), "algorithm.imports=[opo]", "algorithm.name=opo", "algorithm.length_power=1.0",
        "rollout.max_staleness=0", "algorithm.off_policy=none", "task.train_size=64", "trainer.lr=5e-4",
        f"run.steps={steps}", f"eval.every={steps}", "run.progress=false", f"run.output_dir={tmp_path}",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "examples")])}
    done = subprocess.run([sys.executable, "-m", "flywheel.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "quickstart"
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())["algorithm"]
    assert recorded["name"] == "opo" and recorded["imports"] == ["opo"] and recorded["length_power"] == 1.0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "loss/policy" in r]
    assert [r["step"] for r in trained] == list(range(1, steps + 1))
    first, last = (sum(r["reward/mean"] for r in part) / len(part) for part in (trained[:3], trained[-3:]))
    print(f"opo: mean train reward of the first and last 3 steps {first:.3f} -> {last:.3f}")  # 0.354 -> 0.505 here
    assert last >= first + 0.05, (first, last)
