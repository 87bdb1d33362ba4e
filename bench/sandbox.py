"""Sandbox throughput and latency of a trivial program through the zygote pool, against plain `python3 -c`.

    .venv/bin/python bench/sandbox.py --executions 300

Both run sequentially in the same process, the same number of times, after a few warm-up runs; writes
bench/results/sandbox.json and the table of bench/sandbox.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

from flywheel.sandbox import Sandbox
from flywheel.sandbox.jail import JAIL_PYTHON

HERE = Path(__file__).resolve().parent
PROGRAM = "print(1)"
WARMUP = 10


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def measure(call, executions: int) -> tuple[float, list[float]]:
    """(executions per second, latencies in ms) of ``executions`` sequential calls."""
    for _ in range(WARMUP):
        call()
    latencies = []
    start = time.perf_counter()
    for _ in range(executions):
        t = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - t) * 1000)
    return executions / (time.perf_counter() - start), latencies


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    with Sandbox(workers=args.workers) as sb:
        def sandboxed() -> None:
            result = sb.run(PROGRAM)
            assert result.stdout == "1\n" and result.ok, result

        rate, latencies = measure(sandboxed, args.executions)

    def baseline() -> None:
        out = subprocess.run([JAIL_PYTHON, "-c", PROGRAM], capture_output=True, text=True, check=True).stdout
        assert out == "1\n"

    base_rate, base_latencies = measure(baseline, args.executions)
    results = {
        "exec_per_s": round(rate, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "baseline_exec_per_s": round(base_rate, 1),
        "baseline_p50_ms": round(percentile(base_latencies, 50), 2),
        "baseline_p99_ms": round(percentile(base_latencies, 99), 2),
        "executions": args.executions,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/sandbox.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"ratio: {rate / base_rate:.1f}x the executions per second of `python3 -c` (machine: {cpu_name()})")


if __name__ == "__main__":
    main()
