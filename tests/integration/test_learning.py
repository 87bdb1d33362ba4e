"""Short runs of the real loop (vLLM + Ray + trainer) raise the reward on a fixed batch of train prompts,
for every algorithm."""

import json
from pathlib import Path

import pytest
import yaml
from helpers import rollout
from transformers import AutoTokenizer

from flywheel.algorithms import ALGORITHMS
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.envs.arithmetic import make_splits

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {
    "step",
    "reward/mean",
    "loss/policy",
    "train/entropy",
    "train/grad_norm",
    "loss/clip_frac",
    "train/mismatch_kl",
    "timing/wait_for_batch_s",
    "rollout/staleness_max",
    "timing/train_s",
    "timing/sync_s",
    "rollout/tokens_per_s",
    "weights/version",
}


def fixed_batch_reward(workers, tokenizer, problems, config) -> float:
    """Mean exact-answer reward of 16 samples per problem (no shaping: the same yardstick for every algorithm)."""
    wide = config.model_copy(update={"rollout": config.rollout.model_copy(update={"group_size": 16})})
    rewards = [e.reward for group in rollout(workers, tokenizer, problems, wide, seed=5) for e in group]
    return sum(rewards) / len(rewards)


def short_run(fresh_workers, tmp_path, preset: str, steps: int, extra: tuple[str, ...] = ()):
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *extra,
            f"algorithm.name={preset}",
            f"run.output_dir={tmp_path}",
            f"run.steps={steps}",
            f"run.checkpoint_every={steps // 2}",
            f"eval.every={steps // 2}",
            "run.progress=false",
            "task.train_size=64",
            "trainer.lr=5e-4",
        ],  # every step trains on the fixed batch
    )
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    fixed = make_splits(config.task.seed, config.task.env_args["digits"], config.task.train_size, config.task.eval_size)[0]
    workers = fresh_workers(config)
    before = fixed_batch_reward(workers, tokenizer, fixed, config)
    run_dir = train(config, workers)
    after = fixed_batch_reward(workers, tokenizer, fixed, config)
    print(f"{preset}: mean reward on the fixed prompts {before:.3f} -> {after:.3f}")
    return before, after, run_dir


@pytest.mark.slow
def test_short_grpo_run_learns_and_writes_the_run_directory(fresh_workers, tmp_path):
    before, after, run_dir = short_run(fresh_workers, tmp_path, "grpo", steps=12)
    assert after >= before + 0.10, (before, after)

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(13))
    assert "eval/accuracy" in rows[0] and "eval/accuracy" in rows[6] and "eval/accuracy" in rows[12]
    for row in rows[1:]:
        assert REQUIRED <= row.keys()
        assert row["weights/version"] == row["step"]
        assert row["train/mismatch_kl"] < 1e-3
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["run"]["steps"] == 12
    for model_dir in (run_dir / "checkpoints/step_6", run_dir / "checkpoints/step_12", run_dir / "final"):
        assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()


@pytest.mark.slow
def test_two_rank_trainer_learns(fresh_workers, tmp_path):
    """The quickstart with the policy sharded over two FSDP2 ranks (gloo) still learns."""
    before, after, run_dir = short_run(fresh_workers, tmp_path, "grpo", steps=12, extra=("trainer.ranks=2", "trainer.threads=1"))
    assert after >= before + 0.10, (before, after)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    assert all(r["train/mismatch_kl"] < 1e-3 and r["train/padding_frac"] == 0.0 for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("preset", [p for p in ALGORITHMS if p != "grpo"])
def test_every_algorithm_raises_reward(fresh_workers, tmp_path, preset):
    before, after, _ = short_run(fresh_workers, tmp_path, preset, steps=8)
    assert after >= before + 0.05, (before, after)


@pytest.mark.slow
@pytest.mark.parametrize("correction", [("algorithm.off_policy=tis", "algorithm.is_level=sequence"), ("algorithm.off_policy=mis",)])
def test_off_policy_corrections_learn_and_report_ratios(fresh_workers, tmp_path, correction):
    before, after, run_dir = short_run(fresh_workers, tmp_path, "grpo", steps=8, extra=correction)
    assert after >= before + 0.05, (before, after)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    # fp32, synchronous: proximal and behaviour policies agree, so every ratio is 1 and nothing is corrected
    assert all(abs(r["train/is_ratio_mean"] - 1) < 1e-3 and r["train/is_ratio_clip_frac"] == 0 for r in rows)
