"""Sandbox throughput and latency of a trivial program through the zygote pool, against plain `python3 -c`.

    .venv/bin/python bench/sandbox.py --executions 300

Both run sequentially in the same process, the same number of times, after a few warm-up runs, interleaved in
rounds of ``ROUND`` calls each (so that a machine shared with other work loads both alike); writes
bench/results/sandbox.json (with the command and the load average) for the table of bench/sandbox.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from machine import describe, machine

from flywheel.sandbox import Sandbox
from flywheel.sandbox.jail import JAIL_PYTHON

HERE = Path(__file__).resolve().parent
PROGRAM = "print(1)"
WARMUP = 10
ROUND = 10


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def measure(calls: dict, executions: int) -> dict[str, tuple[float, list[float]]]:
    """{name: (executions per second, latencies in ms)} of ``executions`` sequential calls of each, interleaved."""
    for call in calls.values():
        for _ in range(WARMUP):
            call()
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(0, executions, ROUND):
        for name, call in calls.items():
            for _ in range(ROUND):
                t = time.perf_counter()
                call()
                latencies[name].append((time.perf_counter() - t) * 1000)
    return {name: (len(lat) / (sum(lat) / 1000), lat) for name, lat in latencies.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    def baseline() -> None:
        out = subprocess.run([JAIL_PYTHON, "-c", PROGRAM], capture_output=True, text=True, check=True).stdout
        assert out == "1\n"

    load_before = os.getloadavg()
    with Sandbox(workers=args.workers) as sb:

        def sandboxed() -> None:
            result = sb.run(PROGRAM)
            assert result.stdout == "1\n" and result.ok, result

        measured = measure({"sandbox": sandboxed, "baseline": baseline}, args.executions)
        protections = sb.protections
    (rate, latencies), (base_rate, base_latencies) = measured["sandbox"], measured["baseline"]
    results = {
        "exec_per_s": round(rate, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "baseline_exec_per_s": round(base_rate, 1),
        "baseline_p50_ms": round(percentile(base_latencies, 50), 2),
        "baseline_p99_ms": round(percentile(base_latencies, 99), 2),
        "ratio": round(rate / base_rate, 2),
        "executions": len(latencies),
        "workers": args.workers,
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "protections": protections,
        "command": " ".join([".venv/bin/python", "bench/sandbox.py", *sys.argv[1:]]),
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/sandbox.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"ratio: {rate / base_rate:.1f}x the executions per second of `python3 -c` (machine: {describe(machine())})")


if __name__ == "__main__":
    main()
