"""GRPO on the calculator environment with the tiny calculator model: tool-call rate and accuracy per step.

    .venv/bin/python bench/calc_rl.py --steps 40

A stand-in for the training loop until the controller runs environments: multi-turn episodes from
``run_group`` (real vLLM engine actor), ``build_batch`` (GRPO advantages on the model's tokens only,
through ``Completion.loss_mask``), the real trainer actor and weight sync. Writes
bench/results/calc_rl.json and prints the table of bench/calc_rl.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import ray
from transformers import AutoTokenizer

from flywheel.config import load_config
from flywheel.controller import Workers, build_batch, start_engine, start_trainer
from flywheel.envs.registry import make_env
from flywheel.envs.rollout import EnvEpisode, run_group
from flywheel.weights import shm

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_TOKENS = 96


def rates(episodes: list[EnvEpisode]) -> dict[str, float]:
    return {
        "tool_call_rate": sum(e.tool_calls > 0 for e in episodes) / len(episodes),
        "accuracy": sum(e.reward for e in episodes) / len(episodes),
        "tool_error_rate": sum(e.tool_errors for e in episodes) / max(1, sum(e.tool_calls for e in episodes)),
    }


def rollout(engine, tokenizer, tasks, samples: int, temperature: float, seed: int) -> list[list[EnvEpisode]]:
    async def groups():
        return await asyncio.gather(
            *(run_group(engine, tokenizer, lambda: make_env("calculator"), t, samples, temperature, MAX_TOKENS, seed + 1000 * k) for k, t in enumerate(tasks))
        )

    return asyncio.run(groups())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=10)
    args = parser.parse_args()
    config = load_config(
        ROOT / "configs/quickstart.yaml",
        ["model.path=assets/tiny-calc", "run.progress=false", "rollout.prompts_per_step=16", "rollout.group_size=8", f"rollout.max_new_tokens={MAX_TOKENS}"],
    )
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "assets/tiny-calc")
    env = make_env("calculator")
    train_tasks, eval_tasks = env.tasks(16 * args.steps, seed=1), env.tasks(64, seed=0)
    workers = Workers(start_engine(config), start_trainer(config, shm.default_directory()))
    rows = []
    started = time.perf_counter()
    try:
        workers.sync_weights()
        for step in range(args.steps + 1):
            row: dict[str, float] = {"step": step}
            if step % args.eval_every == 0:
                sampled = [e for g in rollout(workers.engine, tokenizer, eval_tasks, 4, 1.0, seed=7) for e in g]
                greedy = [e for g in rollout(workers.engine, tokenizer, eval_tasks, 1, 0.0, seed=7) for e in g]
                row |= {f"eval/{k}": v for k, v in rates(sampled).items()} | {f"eval_greedy/{k}": v for k, v in rates(greedy).items()}
            if step < args.steps:
                groups = rollout(workers.engine, tokenizer, train_tasks[16 * step : 16 * (step + 1)], 8, 1.0, seed=100_000 * (step + 1))
                batch = build_batch(groups, config, tokenizer.pad_token_id, workers)
                metrics = ray.get(workers.trainer.train_step.remote(batch))
                workers.sync_weights()
                row |= {f"train/{k}": v for k, v in rates([e for g in groups for e in g]).items()} | {"mismatch/kl": metrics["mismatch/kl"]}
            row["time/elapsed_s"] = time.perf_counter() - started
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        workers.shutdown()
        ray.shutdown()
    (HERE / "results/calc_rl.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("| step | seconds | tool-call rate (T = 1) | accuracy (T = 1) | greedy accuracy | tool error rate (T = 1) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "eval/accuracy" in r:
            print(f"| {r['step']} | {r['time/elapsed_s']:.0f} | {r['eval/tool_call_rate']:.3f} | {r['eval/accuracy']:.3f} | {r['eval_greedy/accuracy']:.3f} | {r['eval/tool_error_rate']:.3f} |")


if __name__ == "__main__":
    main()
