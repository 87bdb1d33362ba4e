"""TRL's side of bench/peers.py: GRPOTrainer on the prompts flywheel wrote, timed per optimiser step.

Run by the TRL virtual environment's python (bench/peers.py installs it and calls this script):

    bench/.venv-trl/bin/python bench/peers_trl.py --model DIR --prompts train.jsonl --eval eval.jsonl \
        --steps 10 --group-size 8 --max-new-tokens 64 --minibatches 2 --lr 2e-4 --dtype bfloat16 --out trl.json

``--prompts`` holds one line per prompt in flywheel's stream order (``text``: the prompt as flywheel renders
it, ``prompt_ids``: the ids flywheel sends to its engine, ``answer``); ``--eval`` the held-out problems. One
flywheel step (a batch of P prompts x G completions generated, scored and trained on, cut into
``--minibatches`` optimiser steps) is ``--minibatches`` TRL optimiser steps here: per_device_train_batch_size
= P * G / minibatches completions, steps_per_generation = minibatches, no gradient accumulation. The
reward grades like flywheel's arithmetic environment: 1.0 when the completion, stripped of surrounding
whitespace, is exactly the answer. Imports nothing from flywheel (another virtual environment).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


def exact_sum_reward(completions: list[str], answer: list[str], **_) -> list[float]:
    """flywheel's exact_match_reward, restated: 1.0 for the stripped completion equal to the answer."""
    return [1.0 if text.strip() == expected else 0.0 for text, expected in zip(completions, answer)]


class StepClock(TrainerCallback):
    """perf_counter at the start of training and at the end of every optimiser step."""

    def __init__(self) -> None:
        self.marks: list[float] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.marks = [time.perf_counter()]

    def on_step_end(self, args, state, control, **kwargs):
        self.marks.append(time.perf_counter())


def read_jsonl(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


@torch.no_grad()
def greedy_accuracy(model, tokenizer, rows: list[dict], max_new_tokens: int, dtype: torch.dtype, batch: int = 256) -> float:
    """Greedy (temperature 0) accuracy on ``rows``, graded by exact_sum_reward, prompts left-padded."""
    model.eval()
    correct = 0.0
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        width = max(len(r["prompt_ids"]) for r in chunk)
        ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(r["prompt_ids"])) + r["prompt_ids"] for r in chunk])
        mask = torch.tensor([[0] * (width - len(r["prompt_ids"])) + [1] * len(r["prompt_ids"]) for r in chunk])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        texts = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
        correct += sum(exact_sum_reward(texts, [r["answer"] for r in chunk]))
    model.train()
    return correct / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--steps", type=int, required=True, help="flywheel-equal steps: generation batches")
    parser.add_argument("--prompts-per-step", type=int, required=True)
    parser.add_argument("--group-size", type=int, required=True)
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--minibatches", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.99))
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--eval-before", action="store_true", help="also evaluate the model before training")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rows = read_jsonl(args.prompts)
    evals = read_jsonl(args.eval)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    for row in rows + evals:  # GRPOTrainer tokenises the text (as here): it must give flywheel's ids
        ids = tokenizer(text=row["text"])["input_ids"]
        if ids != row["prompt_ids"]:
            raise SystemExit(f"prompt {row['text']!r} tokenises to {ids}, flywheel sent {row['prompt_ids']}")
    completions = args.prompts_per_step * args.group_size
    if completions % args.minibatches:
        raise SystemExit(f"{completions} completions per step do not split into {args.minibatches} minibatches")
    dataset = Dataset.from_list([{"prompt": r["text"], "answer": r["answer"]} for r in rows])

    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)  # fp32 master weights; bf16: autocast
    accuracy_before = greedy_accuracy(model, tokenizer, evals, args.max_new_tokens, dtype) if args.eval_before else None

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="peers-trl-"),
        use_cpu=True,
        bf16=args.dtype == "bfloat16",
        seed=args.seed,
        max_steps=args.steps * args.minibatches,
        per_device_train_batch_size=completions // args.minibatches,
        gradient_accumulation_steps=1,
        steps_per_generation=args.minibatches,
        num_generations=args.group_size,
        num_iterations=1,
        max_completion_length=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",  # every token of the optimiser step weighs the same: flywheel's token_mean
        scale_rewards="group",
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        adam_beta1=args.betas[0],
        adam_beta2=args.betas[1],
        weight_decay=0.0,
        max_grad_norm=1.0,
        shuffle_dataset=False,  # flywheel's stream order
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=model, reward_funcs=exact_sum_reward, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[clock]
    )
    trainer.train()

    optimiser_steps = [b - a for a, b in zip(clock.marks, clock.marks[1:])]
    m = args.minibatches
    steps = [sum(optimiser_steps[i : i + m]) for i in range(0, len(optimiser_steps), m)]  # one generation batch each
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    accuracy = greedy_accuracy(trainer.model, tokenizer, evals, args.max_new_tokens, dtype)
    result = {
        "dtype": args.dtype,
        "optimiser_step_s": optimiser_steps,
        "step_s": steps,
        "median_step_s": statistics.median(steps[1:] or steps),
        "reward_per_optimiser_step": rewards,
        "greedy_accuracy_before": accuracy_before,
        "greedy_accuracy": accuracy,
        "settings": {
            "per_device_train_batch_size": config.per_device_train_batch_size,
            "steps_per_generation": config.steps_per_generation,
            "gradient_accumulation_steps": config.gradient_accumulation_steps,
            "generation_batch_size": config.generation_batch_size,
            "loss_type": config.loss_type,
            "threads": torch.get_num_threads(),
        },
        "versions": {"trl": __import__("trl").__version__, "transformers": __import__("transformers").__version__, "torch": torch.__version__},
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("dtype", "median_step_s", "greedy_accuracy_before", "greedy_accuracy")}), flush=True)


if __name__ == "__main__":
    main()
