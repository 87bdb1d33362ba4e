"""The local Ray that flywheel starts runs its workers at the driver's priority: Ray's default (nice 15)
would let any other job on the machine starve the engines and the trainer."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, ray
from flywheel.cluster.workers import connect, ray_cluster
from flywheel.config import load_config
connect(ray_cluster(load_config("configs/quickstart.yaml")))
print("niceness", os.getpriority(os.PRIO_PROCESS, 0), ray.get(ray.remote(lambda: os.getpriority(os.PRIO_PROCESS, 0)).remote()))
ray.shutdown()
"""


def test_workers_of_a_local_ray_run_at_the_drivers_priority():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300, check=True).stdout
    [line] = [line for line in out.splitlines() if line.startswith("niceness")]
    _, driver, worker = line.split()
    assert worker == driver, line
