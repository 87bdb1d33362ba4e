"""Does the warm-up model of assets/tiny-calc call the calculator tool? Sampled through the real engine.

    .venv/bin/python bench/calc_tool_calls.py --tasks 64 --samples 8

Runs the ``calculator`` environment with ``run_group`` (vLLM engine actor, tiny-calc) on held-out
tasks (seed 0; the warm-up used seed 1234) at temperature 1 and greedily; writes
bench/results/calc_tool_calls.json and prints the table of bench/calc_tool_calls.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import ray
from transformers import AutoTokenizer

from flywheel.cluster.workers import engine_group, start_engines
from flywheel.config import load_config
from flywheel.envs.registry import make_env
from flywheel.rollout.group import EnvEpisode, episode_metrics, run_group

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_TOKENS = 96  # per model turn: a call is about 70 tokens


def summary(episodes: list[EnvEpisode]) -> dict[str, float]:
    first_calls = [e for e in episodes if e.tool_calls > 0]
    return {
        "episodes": len(episodes),
        "tool_call_rate": len(first_calls) / len(episodes),  # episodes with at least one call
        "well_formed_call_rate": sum(e.tool_calls > e.tool_errors for e in episodes) / len(episodes),  # at least one call that ran
        "accuracy": sum(e.reward for e in episodes) / len(episodes),
        "accuracy_when_calling": sum(e.reward for e in first_calls) / max(1, len(first_calls)),
        **episode_metrics(episodes),
    }


async def rollout(engine, tokenizer, samples: int, temperature: float, tasks) -> list[EnvEpisode]:
    groups = await asyncio.gather(
        *(
            run_group(engine, tokenizer, lambda: make_env("calculator"), t, samples, temperature, MAX_TOKENS, seed=1000 * k)
            for k, t in enumerate(tasks)
        )
    )
    return [e for g in groups for e in g]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args()
    config = load_config(ROOT / "configs/quickstart.yaml", ["model.path=assets/tiny-calc", "run.progress=false"])
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets/tiny-calc")
    tasks = make_env("calculator").tasks(args.tasks, seed=0)
    [engine] = start_engines(engine_group(config))
    try:
        results = {
            "temperature_1": summary(asyncio.run(rollout(engine, tokenizer, args.samples, 1.0, tasks))),
            "greedy": summary(asyncio.run(rollout(engine, tokenizer, 1, 0.0, tasks))),
        }
    finally:
        engine.shutdown()
        ray.shutdown()
    (HERE / "results/calc_tool_calls.json").write_text(json.dumps(results, indent=2) + "\n")
    keys = [
        "tool_call_rate",
        "well_formed_call_rate",
        "accuracy",
        "accuracy_when_calling",
        "tools/calls_per_episode",
        "tools/error_rate",
        "env/turns_mean",
    ]
    print("| sampling | episodes | " + " | ".join(keys) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in keys) + " |")
    for name, row in results.items():
        print(f"| {name} | {row['episodes']} | " + " | ".join(f"{row[k]:.3f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
