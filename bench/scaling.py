"""Step time as the workload doubles: prompts per step, group size, completion length.

    .venv/bin/python bench/scaling.py [--steps 5]

A random Qwen2 of about 8M parameters (bench/trainer.py's "8M" shape, the tests' ASCII tokenizer) on the
arithmetic task: a random model almost never emits its end-of-sequence token, so every completion runs to
``rollout.max_new_tokens`` and the generated tokens are exactly prompts x group x length. The base workload
is 16 prompts x 8 completions x 64 tokens (synchronous, fp32, the shipped defaults otherwise); each series
doubles one factor twice. Every configuration is a real ``flywheel train`` run (``controller.train``: Ray,
one vLLM engine, one trainer rank) of ``--steps`` steps; the numbers are medians over the steps after the
first: ``step_s`` (timing/step_s), generation (timing/wait_for_batch_s: the trainer waiting for the batch),
training (timing/train_s) and the weight sync (timing/sync_s + timing/wait_for_weights_s). ``per_1k_tokens``
divides by the completion tokens of the step, so linear scaling keeps it flat.
Writes bench/results/scaling.json and bench/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from trainer import save_model  # noqa: E402  (bench/trainer.py: the random Qwen2 shapes)

BASE = {"prompts": 16, "group": 8, "length": 64}
SERIES = {"prompts": (16, 32, 64), "group": (8, 16, 32), "length": (64, 128, 256)}


def workloads() -> list[dict[str, int]]:
    """The base workload, then each factor doubled twice (the base appears once)."""
    rows = [dict(BASE)]
    for factor, values in SERIES.items():
        rows += [BASE | {factor: value} for value in values if value != BASE[factor]]
    return rows


def run(model: Path, workload: dict[str, int], steps: int, out_dir: Path) -> dict:
    name = f"p{workload['prompts']}-g{workload['group']}-l{workload['length']}"
    config = load_config(
        HERE.parent / "configs/quickstart.yaml",
        [
            f"model.path={model}",
            f"rollout.prompts_per_step={workload['prompts']}",
            f"rollout.group_size={workload['group']}",
            f"rollout.max_new_tokens={workload['length']}",
            f"run.steps={steps}",
            f"eval.every={steps + 1}",
            "eval.greedy=false",
            f"run.checkpoint_every={steps + 1}",
            f"run.output_dir={out_dir}",
            f"run.name={name}",
            "run.progress=false",
        ],
    )
    started = time.perf_counter()
    rows = [r for r in read_metrics(train(config) / "metrics.jsonl") if r["step"] > 1]
    median = lambda key: statistics.median(r[key] for r in rows)  # noqa: E731
    tokens = workload["prompts"] * workload["group"] * median("rollout/response_length_mean")
    step_s = median("timing/step_s")
    return workload | {
        "completion_tokens": round(tokens),
        "step_s": round(step_s, 3),
        "generation_s": round(median("timing/wait_for_batch_s"), 3),
        "train_s": round(median("timing/train_s"), 3),
        "sync_s": round(median("timing/sync_s") + median("timing/wait_for_weights_s"), 3),
        "per_1k_tokens_s": round(1000 * step_s / tokens, 4),
        "run_s": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="flywheel-scaling-"))
    model = out_dir / "model-8M"
    shape = save_model(model, "8M")
    results = []
    for workload in workloads():
        results.append(run(model, workload, args.steps, out_dir))
        print(json.dumps(results[-1]), flush=True)
    record = {"command": f".venv/bin/python bench/scaling.py --steps {args.steps}", "model": shape, "results": results}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/scaling.json").write_text(json.dumps(record, indent=2) + "\n")
    print((HERE / "results/scaling.json").read_text())


if __name__ == "__main__":
    main()
