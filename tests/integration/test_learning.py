"""A short run of the real loop (vLLM + Ray + trainer) raises the reward on a fixed batch of train prompts."""

import json
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer

from flywheel.config import load_config
from flywheel.controller import rollout, train
from flywheel.envs.arithmetic import make_splits

REPO = Path(__file__).resolve().parents[2]


REQUIRED = {
    "step", "reward/mean", "loss", "entropy", "grad_norm", "clip_frac", "mismatch/kl", "timing/rollout_s",
    "timing/train_s", "timing/sync_s", "rollout/tokens_per_s", "weights/version",
}


def fixed_batch_reward(workers, tokenizer, problems, config) -> float:
    episodes = rollout(workers, tokenizer, problems, config.model_copy(update={"rollout": config.rollout.model_copy(update={"group_size": 16})}), seed=5)
    return sum(e.reward for e in episodes) / len(episodes)


@pytest.mark.slow
def test_short_run_raises_reward_on_fixed_prompts(fresh_workers, tmp_path):
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [f"run.output_dir={tmp_path}", "run.steps=12", "run.checkpoint_every=6", "eval.every=6", "run.progress=false",
         "task.train_size=64", "trainer.lr=5e-4"],  # every step trains on the fixed batch
    )
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    train_split, _ = make_splits(config.task.seed, config.task.digits, config.task.train_size, config.task.eval_size)
    fixed = train_split[:64]

    workers = fresh_workers(config)
    reward_before = fixed_batch_reward(workers, tokenizer, fixed, config)
    run_dir = train(config, workers)
    reward_after = fixed_batch_reward(workers, tokenizer, fixed, config)
    print(f"mean reward on the fixed prompts: {reward_before:.3f} -> {reward_after:.3f}")
    assert reward_after >= reward_before + 0.10, (reward_before, reward_after)

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(13))
    assert "eval/accuracy" in rows[0] and "eval/accuracy" in rows[6] and "eval/accuracy" in rows[12]
    for row in rows[1:]:
        assert REQUIRED <= row.keys()
        assert row["weights/version"] == row["step"]
        assert row["mismatch/kl"] < 1e-3
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["run"]["steps"] == 12
    for model_dir in (run_dir / "checkpoints/step_6", run_dir / "checkpoints/step_12", run_dir / "final"):
        assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
