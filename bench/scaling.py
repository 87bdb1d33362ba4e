"""Step time as the workload doubles: prompts per step, group size, completion length.

    .venv/bin/python bench/scaling.py [--steps 4]

A random Qwen2 of about 8M parameters (bench/trainer.py's "8M" shape, the tests' ASCII tokenizer) on the
arithmetic task: a random model almost never emits its end-of-sequence token, so every completion runs to
``rollout.max_new_tokens`` and the generated tokens are exactly prompts x group x length. The base workload
is 8 prompts x 8 completions x 64 tokens (synchronous, fp32, the shipped defaults otherwise); each series
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
import os
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

BASE = {"prompts": 8, "group": 8, "length": 64}
SERIES = {"prompts": (8, 16, 32), "group": (8, 16, 32), "length": (64, 128, 256)}


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
            "rollout.max_staleness=0",
            "algorithm.off_policy=none",  # synchronous, as measured
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
    started, load_before = time.perf_counter(), os.getloadavg()[0]
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
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
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
    (HERE / "scaling.md").write_text(report(record))
    print((HERE / "scaling.md").read_text())


def doublings(results: list[dict]) -> list[dict]:
    """Per series, each doubling's growth of the step, generation and training times (2.0 is linear)."""
    base = next(r for r in results if all(r[k] == v for k, v in BASE.items()))
    rows = []
    for factor in SERIES:
        series = [base] + [r for r in results if r[factor] != BASE[factor]]
        for before, after in zip(series, series[1:]):
            rows.append(
                {"factor": factor, "from": before[factor], "to": after[factor]}
                | {key: round(after[key] / before[key], 2) for key in ("step_s", "generation_s", "train_s")}
            )
    return rows


def report(record: dict) -> str:
    shape = record["model"]
    lines = [
        "# Step time as the workload doubles",
        "",
        f"A random Qwen2 of {shape['params'] / 1e6:.1f}M parameters ({shape['layers']} layers, hidden {shape['hidden']}, vocab 8192),",
        "the arithmetic task, synchronous fp32 `flywheel train` runs on this 2-core machine; completions always run",
        "to the length limit. Medians over the steps after the first. Produced by:",
        "",
        "```bash",
        record["command"],
        "```",
        "",
        "| prompts | group | length | completion tokens | step s | generation s | training s | sync s | s per 1k tokens | load average |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *(
            f"| {r['prompts']} | {r['group']} | {r['length']} | {r['completion_tokens']} | {r['step_s']:.2f} | {r['generation_s']:.2f} "
            f"| {r['train_s']:.2f} | {r['sync_s']:.2f} | {r['per_1k_tokens_s']:.3f} | {r['load_average'][0]} -> {r['load_average'][1]} |"
            for r in record["results"]
        ),
        "",
        "Growth of each time when one factor doubles (2.00 is linear in the work; below 2, the fixed costs of a step",
        "are amortised; above 2, something grows faster than the tokens):",
        "",
        "| doubled | from -> to | step | generation | training |",
        "| --- | --- | ---: | ---: | ---: |",
        *(
            f"| {d['factor']} | {d['from']} -> {d['to']} | {d['step_s']:.2f} | {d['generation_s']:.2f} | {d['train_s']:.2f} |"
            for d in doublings(record["results"])
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
