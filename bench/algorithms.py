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

from flywheel.config import PRESETS, load_config
from flywheel.controller import Workers, start_engine, start_trainer, train
from flywheel.monitor.metrics import read_metrics

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--presets", nargs="*", default=list(PRESETS))
    args = parser.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="flywheel-bench-"))
    base = load_config(HERE.parent / "configs/quickstart.yaml", ["run.progress=false"])
    engine = start_engine(base)
    results = {}
    for preset in args.presets:
        config = load_config(
            HERE.parent / "configs/quickstart.yaml",
            [f"algorithm.preset={preset}", f"run.steps={args.steps}", f"eval.every={args.steps}",
             f"run.checkpoint_every={args.steps}", f"run.output_dir={out_dir}", f"run.name={preset}", "run.progress=false"],
        )
        trainer = start_trainer(config, out_dir / f"weights-{preset}")
        run_dir = train(config, Workers(engine, trainer))
        ray.kill(trainer)
        rows = read_metrics(run_dir / "metrics.jsonl")
        steps = [r for r in rows if r["step"] > 0]
        seconds = sum(r["timing/rollout_s"] + r["timing/train_s"] + r["timing/sync_s"] for r in steps) / len(steps)
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
    ray.shutdown()


if __name__ == "__main__":
    main()
