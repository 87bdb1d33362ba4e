"""Every algorithm preset on the quickstart task: eval accuracy after a fixed number of steps, seconds per step.

    .venv/bin/python bench/algorithms.py --steps 100

One vLLM engine serves all runs (a fresh trainer each, starting from the shipped model); writes
bench/results/algorithms.json and the table of bench/algorithms.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import ray

from flywheel.algorithms import ALGORITHMS as PRESETS
from flywheel.cluster.workers import Workers, engine_group, start_engines, start_trainer, trainer_spec
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics
from flywheel.weights.file import FileTransport

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--presets", nargs="*", default=[p for p, a in PRESETS.items() if not a.needs_teacher])  # distill: bench/distill.py
    args = parser.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="flywheel-bench-"))
    base = load_config(HERE.parent / "configs/quickstart.yaml", ["run.progress=false"])
    engines = start_engines(engine_group(base))
    results = {}
    for preset in args.presets:
        config = load_config(
            HERE.parent / "configs/quickstart.yaml",
            [
                "rollout.max_staleness=0",
                "algorithm.off_policy=none",  # synchronous, as measured
                f"algorithm.name={preset}",
                f"run.steps={args.steps}",
                f"eval.every={args.steps}",
                f"run.checkpoint_every={args.steps}",
                f"run.output_dir={out_dir}",
                f"run.name={preset}",
                "run.progress=false",
            ],
        )
        trainer = start_trainer(trainer_spec(config), FileTransport(out_dir / f"weights-{preset}"))
        run_dir = train(config, Workers(engines, trainer))
        trainer.shutdown()
        rows = read_metrics(run_dir / "metrics.jsonl")
        steps = [r for r in rows if r["step"] > 0]
        seconds = sum(r["timing/step_s"] for r in steps) / len(steps)
        results[preset] = {
            "eval_accuracy_step0": rows[0]["eval/accuracy"],
            "eval_accuracy": rows[-1]["eval/accuracy"],
            "greedy_accuracy": rows[-1]["eval/greedy_accuracy"],
            "s_per_step": round(seconds, 3),
            "steps": args.steps,
        }
        print(preset, results[preset], flush=True)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/algorithms.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "algorithms.md").write_text(report(results, args.steps))
    ray.shutdown()


def report(results: dict[str, dict], steps: int) -> str:
    lines = [
        "# Algorithms on the quickstart task",
        "",
        f"Every preset, {steps} steps from the shipped model (`assets/tiny-adder`) on `configs/quickstart.yaml`",
        "(64 prompts x 8 samples per step, lr 2e-4, 2 optimiser steps per batch), one vLLM engine and a fresh",
        "trainer per preset, on a 2-core CPU machine. Eval: 200 held-out problems, one sample each at",
        "temperature 1 (`eval/accuracy`) and greedy. Seconds per step = generation + training + weight sync",
        "(mean over steps; DAPO's includes its extra sampling rounds, PPO's the critic).",
        "",
        "Produced by:",
        "",
        "```bash",
        f".venv/bin/python bench/algorithms.py --steps {steps}",
        "```",
        "",
        "| preset | eval accuracy, step 0 | eval accuracy | greedy accuracy | s / step |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        lines.append(f"| `{name}` | {r['eval_accuracy_step0']:.3f} | {r['eval_accuracy']:.3f} | {r['greedy_accuracy']:.3f} | {r['s_per_step']:.2f} |")
    lines += ["", "The same figures are in `bench/results/algorithms.json`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
