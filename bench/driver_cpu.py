"""The driver's CPU per group and per 1,000 episodes, with the groups made in the driver (rollout.workers=0) and in
rollout workers, on three workloads.

    .venv/bin/python bench/driver_cpu.py [--steps 12] [--skip 3] [--workers 0,2] [--repeats 2] [--workloads quickstart,calculator,python_code]

Each run is ``flywheel train`` in a process of its own (the driver: the controller, the rollout stream and, without
workers, every episode, environment step and grade; Ray, the engines, the trainer and the workers are other
processes). This process polls the run's metrics.jsonl and reads the driver process's own CPU time (user + system)
when step ``--skip`` is logged and when the last step is; the difference is divided by the groups admitted and
finished in between (trained, and dropped as stale, invalid or uninformative) and by their episodes. The median
step time is over the same steps.

Workloads: ``quickstart`` (configs/quickstart.yaml: one-turn arithmetic, 64 prompts x 8), ``calculator``
(configs/calculator.yaml: up to 3 turns with a calculator tool, 16 x 8) and ``python_code`` (the code environment,
2 turns, 16 x 8, on a copy of assets/tiny-calc whose context is raised to 1,024 tokens, since its prompts are
longer than the shipped models' 256). The tiny model never writes a ```python block that parses, so the
python_code rows measure the multi-turn loop, code parsing and feedback, never the sandbox running code.
Writes bench/results/driver_cpu.json and bench/driver_cpu.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COMMON = ["run.progress=false", "eval.every=1000", "eval.greedy=false", "run.checkpoint_every=1000", "monitor.dump_every=0"]


def long_context_model(directory: Path) -> Path:
    """assets/tiny-calc with a 1,024-token context (rotary positions: nothing to learn for the longer one)."""
    path = directory / "tiny-calc-1k"
    shutil.copytree(REPO / "assets/tiny-calc", path)
    for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        data = json.loads((path / name).read_text())
        data[key] = 1024
        (path / name).write_text(json.dumps(data, indent=2))
    return path


def workloads(scratch: Path) -> dict[str, tuple[str, list[str]]]:
    code = long_context_model(scratch)
    return {
        "quickstart": ("configs/quickstart.yaml", []),
        "calculator": ("configs/calculator.yaml", []),
        "python_code": (
            "configs/calculator.yaml",
            [f"model.path={code}", "task.name=python_code", "task.env_args={max_turns: 2}", "rollout.max_new_tokens=64", "task.eval_size=16"],
        ),
    }


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def run(config: str, overrides: list[str], steps: int, skip: int, out: Path) -> dict:
    """One run; the driver's CPU seconds from step ``skip`` to the last, and what was made meanwhile."""
    command = [sys.executable, "-m", "flywheel.cli", "train", str(REPO / config), *COMMON, f"run.steps={steps}", f"run.output_dir={out}", *overrides]
    log = out.with_suffix(".log")
    out.mkdir(parents=True)
    driver = subprocess.Popen(command, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    process, marks = psutil.Process(driver.pid), {}
    try:
        while driver.poll() is None:
            metrics = next(out.glob("*/metrics.jsonl"), None)
            done = len(read_rows(metrics)) - 1 if metrics else -1  # after the step-0 eval row
            for step in (skip, steps):
                if done >= step and step not in marks:
                    marks[step] = cpu_s(process)
            if steps in marks:
                break
            time.sleep(0.02)
        code = driver.wait(timeout=600)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, 9)
    if code != 0 or len(marks) < 2:
        raise RuntimeError(f"the run failed (exit {code}): {log.read_text()[-2000:]}")
    rows = [r for r in read_rows(next(out.glob("*/metrics.jsonl")))[1:] if skip < r["step"] <= steps]
    dropped = sum(r["rollout/dropped_stale"] + r["rollout/dropped_invalid_groups"] + r["rollout/dropped_uninformative"] for r in rows)
    return {"cpu_s": marks[steps] - marks[skip], "rows": rows, "dropped_groups": dropped}


def measure(name: str, config: str, overrides: list[str], workers: int, steps: int, skip: int, scratch: Path) -> dict:
    from flywheel.config import load_config

    resolved = load_config(REPO / config, [*COMMON, *overrides])
    r = resolved.rollout
    out = run(config, [*overrides, f"rollout.workers={workers}"], steps, skip, scratch / f"{name}-{workers}")
    groups = (steps - skip) * r.prompts_per_step + out["dropped_groups"]
    episodes = groups * r.group_size
    step_s = statistics.median(row["timing/step_s"] for row in out["rows"])
    return {
        "workload": name,
        "workers": workers,
        "steps_measured": steps - skip,
        "groups": groups,
        "episodes": episodes,
        "driver_cpu_s": round(out["cpu_s"], 3),
        "driver_cpu_ms_per_group": round(1000 * out["cpu_s"] / groups, 3),
        "driver_cpu_s_per_1000_episodes": round(1000 * out["cpu_s"] / episodes, 3),
        "median_step_s": round(step_s, 3),
        "load_average_before": round(os.getloadavg()[0], 2),
    }


def median_run(tries: list[dict]) -> dict:
    """The try with the median driver CPU per group (the lower middle one of an even count), every try's value kept."""
    ranked = sorted(tries, key=lambda t: t["driver_cpu_ms_per_group"])
    return ranked[(len(ranked) - 1) // 2] | {"ms_per_group_by_try": [t["driver_cpu_ms_per_group"] for t in tries]}


def report(result: dict) -> str:
    lines = [
        "# The driver's CPU per group, with and without rollout workers",
        "",
        f"`bench/driver_cpu.py` ({result['date']}, {result['machine']['cores']}-core {result['machine']['cpu']}). Produced by:",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "The driver process's own CPU time (user + system) over the measured steps, per group admitted and finished in",
        "them and per 1,000 of their episodes; the median step over the same steps. `workers` 0: every group is made in the",
        "driver; N: by N rollout workers (Ray actors), the driver keeping admission, batching, training and checkpoints.",
        "Each setting ran several times, alternating with the other; the row is the try with the median CPU per group.",
        "",
        "| workload | workers | steps | groups | driver CPU, s | ms / group | s / 1,000 episodes | median step, s | ms / group, each try |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in result["runs"]:
        lines.append(
            f"| {row['workload']} | {row['workers']} | {row['steps_measured']} | {row['groups']} | {row['driver_cpu_s']:.2f} | "
            f"{row['driver_cpu_ms_per_group']:.2f} | {row['driver_cpu_s_per_1000_episodes']:.3f} | {row['median_step_s']:.2f} | "
            f"{', '.join(f'{v:.2f}' for v in row['ms_per_group_by_try'])} |"
        )
    lines += ["", "Against the goal of at most 0.5 ms of driver CPU per group:", ""]
    for name in dict.fromkeys(row["workload"] for row in result["runs"]):
        by = {row["workers"]: row for row in result["runs"] if row["workload"] == name}
        if 0 in by and len(by) > 1:
            most = max(w for w in by if w)
            a, b = by[0], by[most]
            lines.append(
                f"- {name}: {a['driver_cpu_ms_per_group']:.2f} ms per group in the driver, {b['driver_cpu_ms_per_group']:.2f} ms with "
                f"{most} workers ({a['driver_cpu_ms_per_group'] / b['driver_cpu_ms_per_group']:.1f}x less); median step "
                f"{a['median_step_s']:.2f} s vs {b['median_step_s']:.2f} s."
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--skip", type=int, default=3, help="steps left out at the start (warm-up)")
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--workloads", default="quickstart,calculator,python_code")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each setting, alternating; the median is reported")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="driver-cpu-") as tmp:
        scratch = Path(tmp)
        chosen = workloads(scratch)
        for name in args.workloads.split(","):
            config, overrides = chosen[name]
            tries = {}
            for attempt in range(args.repeats):
                for workers in (int(w) for w in args.workers.split(",")):
                    tries.setdefault(workers, []).append(measure(name, config, overrides, workers, args.steps, args.skip, scratch / str(attempt)))
                    print(json.dumps(tries[workers][-1]), flush=True)
            runs += [median_run(each) for each in tries.values()]
    result = {
        "command": " ".join([".venv/bin/python bench/driver_cpu.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "runs": runs,
    }
    (HERE / "results/driver_cpu.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "driver_cpu.md").write_text(report(result))


if __name__ == "__main__":
    main()
