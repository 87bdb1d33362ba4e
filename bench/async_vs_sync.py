"""Synchronous vs asynchronous training on the quickstart task: wall-clock for a fixed number of steps
and eval accuracy against wall-clock, with and without an off-policy correction.

    .venv/bin/python bench/async_vs_sync.py --steps 100

All runs get the same two cores split the same way: the engine's compute threads on core 0
(engine.cpu_bind=0), the trainer on core 1 (one thread). Sync is max_staleness 0 (generate, then
train); async is max_staleness --staleness (generation runs while the trainer trains), once without a
correction and once with truncated importance sampling (algorithm.off_policy=tis) of the stale tokens.
Eval: --eval-size held-out problems, one sample each at temperature 1 and one greedy. Fresh engine and
trainer per run; writes bench/results/async_vs_sync.json and bench/async_vs_sync.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path

import ray

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics

HERE = Path(__file__).resolve().parent
SPLIT_CORES = ["engine.cpu_bind='0'", "trainer.threads=1", "trainer.cpu_affinity=[1]"]


#: name: (max_staleness from --staleness?, algorithm.off_policy)
MODES = {"sync": (False, "none"), "async": (True, "none"), "async+tis": (True, "tis")}


def run(mode: str, args, out_dir: Path) -> dict:
    stale, correction = MODES[mode]
    config = load_config(
        HERE.parent / "configs/quickstart.yaml",
        [
            *SPLIT_CORES,
            f"rollout.max_staleness={args.staleness if stale else 0}",
            f"algorithm.off_policy={correction}",
            f"rollout.prompts_per_step={args.prompts}",
            f"task.eval_size={args.eval_size}",
            f"run.steps={args.steps}",
            f"eval.every={args.eval_every}",
            f"run.checkpoint_every={args.steps}",
            f"run.output_dir={out_dir}",
            f"run.name={mode.replace('+', '-')}",
            "run.progress=false",
        ],
    )
    rows = read_metrics(train(config) / "metrics.jsonl")
    steps = [r for r in rows if r["step"] > 0]
    clock, curve = 0.0, [(0.0, rows[0]["eval/accuracy"], rows[0]["eval/greedy_accuracy"])]
    for r in steps:
        clock += r["timing/step_s"]  # training wall-clock: evaluation time left out
        if "eval/accuracy" in r:
            curve.append((round(clock, 2), r["eval/accuracy"], r["eval/greedy_accuracy"]))
    mean = lambda key: round(sum(r[key] for r in steps) / len(steps), 4)  # noqa: E731
    last = curve[-3:]  # the last three evals: less noise than one
    return {
        "seconds": round(clock, 2),
        "eval_curve": curve,
        "final_accuracy": round(sum(point[1] for point in last) / len(last), 4),
        "final_greedy_accuracy": round(sum(point[2] for point in last) / len(last), 4),
        "wait_for_batch_s": mean("timing/wait_for_batch_s"),
        "train_s": mean("timing/train_s"),
        "sync_s": mean("timing/sync_s"),
        "staleness_mean": mean("rollout/staleness_mean"),
        "dropped_stale": sum(r["rollout/dropped_stale"] for r in steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=64, help="prompts per step (8 samples each)")
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--eval-size", type=int, default=500)
    args = parser.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="flywheel-bench-"))
    runs = {}
    for mode in MODES:
        load_before = os.getloadavg()[0]
        runs[mode] = run(mode, args, out_dir) | {"load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)]}
        print(mode, runs[mode], flush=True)
    result = {
        "command": command(args),
        "steps": args.steps,
        "prompts_per_step": args.prompts,
        "max_staleness": args.staleness,
        "eval_size": args.eval_size,
        "speedup": {mode: round(runs["sync"]["seconds"] / r["seconds"], 3) for mode, r in runs.items() if mode != "sync"},
        "runs": runs,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/async_vs_sync.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "async_vs_sync.md").write_text(report(result))
    print(result["speedup"])


def command(args) -> str:
    return (
        f".venv/bin/python bench/async_vs_sync.py --steps {args.steps} --staleness {args.staleness} --prompts {args.prompts} "
        f"--eval-every {args.eval_every} --eval-size {args.eval_size}"
    )


def report(result: dict) -> str:
    runs, s, steps = result["runs"], result["runs"]["sync"], result["steps"]
    lines = [
        "# Asynchronous vs synchronous RL",
        "",
        f"The quickstart task, {steps} steps of {result['prompts_per_step']} prompts x 8 samples, on a 2-core CPU",
        "machine with the engine's compute threads on core 0 and the trainer (one thread) on core 1 in every run.",
        f"Sync: max_staleness 0. Async: max_staleness {result['max_staleness']}, generation continuing while the trainer",
        "trains, weights loaded into the engine in flight; once as is, once with truncated importance sampling",
        "of the stale tokens (`algorithm.off_policy=tis`). Seconds = the sum of the step times (evaluation left out).",
        f"Accuracy: {result['eval_size']} held-out problems; *final* is the mean of the last three evals. The machine's",
        "1-minute load average before and after each run is recorded (above 2, other work shared the two cores).",
        "",
        "Produced by:",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "| mode | seconds | s / step | speed-up | trainer waits for a batch, s / step | training, s / step | weight sync, s / step "
        "| mean staleness | final accuracy (T=1) | final greedy accuracy | load average |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, r in runs.items():
        speedup = result["speedup"].get(name, 1.0)
        lines.append(
            f"| {name} | {r['seconds']:.1f} | {r['seconds'] / steps:.3f} | {speedup:.2f}x | {r['wait_for_batch_s']:.3f} | {r['train_s']:.3f} "
            f"| {r['sync_s']:.3f} | {r['staleness_mean']:.2f} | {r['final_accuracy']:.3f} | {r['final_greedy_accuracy']:.3f} "
            f"| {r['load_average'][0]} -> {r['load_average'][1]} |"
        )
    generation, training = s["wait_for_batch_s"], s["train_s"]  # per step, measured in the sync run
    bound = (generation + training + s["sync_s"]) / max(generation, training)
    lines += [
        "",
        f"In the sync run a step spends {generation:.2f} s generating and {training:.2f} s training, so perfect overlap",
        f"would give at most {bound:.2f}x (the slower side alone).",
        "",
        *accuracy_gaps(runs, result["eval_size"]),
        "",
        "Eval accuracy (one sample at temperature 1 / greedy) against training wall-clock:",
        "",
        "| " + " | ".join(f"{name}: seconds | accuracy | greedy" for name in runs) + " |",
        "| " + " | ".join("---: | ---: | ---:" for _ in runs) + " |",
    ]
    for points in zip(*(r["eval_curve"] for r in runs.values())):
        lines.append("| " + " | ".join(f"{t:.1f} | {acc:.3f} | {greedy:.3f}" for t, acc, greedy in points) + " |")
    return "\n".join(lines) + "\n"


def accuracy_gaps(runs: dict, eval_size: int) -> list[str]:
    """Each async run's final accuracy against sync's, with the noise of a difference of two such means
    (binomial, three evals of ``eval_size`` problems each, treated as independent)."""
    p = runs["sync"]["final_accuracy"]
    noise = math.sqrt(2 * p * (1 - p) / (3 * eval_size))
    lines = []
    for name, r in runs.items():
        if name != "sync":
            gap, greedy = r["final_accuracy"] - p, r["final_greedy_accuracy"] - runs["sync"]["final_greedy_accuracy"]
            lines.append(
                f"- {name}: final accuracy {gap:+.3f} against sync (greedy {greedy:+.3f}); one standard error of such a gap is about {noise:.3f}."
            )
    return lines


if __name__ == "__main__":
    main()
    ray.shutdown()
