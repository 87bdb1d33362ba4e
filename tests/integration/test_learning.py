"""Short runs of the real loop (vLLM + Ray + trainer) raise the reward on a fixed batch of train prompts,
for every algorithm."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import SYNC, rollout
from transformers import AutoTokenizer

from flywheel.algorithms import ALGORITHMS
from flywheel.cluster.cores import as_cpu_list, halves
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
            *SYNC,
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
@pytest.mark.parametrize("preset", [p for p, a in ALGORITHMS.items() if p != "grpo" and not a.needs_teacher])  # distill: test_distill_run.py
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


@pytest.mark.slow
def test_the_shipped_quickstart_learns_asynchronously_on_split_cores(tmp_path):
    """``flywheel train configs/quickstart.yaml`` as shipped: staleness 1 with TIS, the engine and the trainer on
    separate halves of this machine's cores, the mean training reward up within 30 steps."""
    steps = 30
    args = ["train", "configs/quickstart.yaml", f"run.steps={steps}", f"eval.every={steps}", "run.progress=false", f"run.output_dir={tmp_path}"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-m", "flywheel.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "quickstart"
    engine_cores, trainer_cores = halves(os.sched_getaffinity(0))
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert recorded["engine"]["cpu_bind"] == as_cpu_list(engine_cores) and recorded["trainer"]["cpu_affinity"] == trainer_cores
    assert f"engines on cores {as_cpu_list(engine_cores)}, trainer on cores {as_cpu_list(trainer_cores)}" in " ".join(done.stderr.split())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in trained] == list(range(1, steps + 1))
    assert all(r["rollout/staleness_max"] <= 1 for r in trained) and sum(r["rollout/staleness_mean"] > 0 for r in trained) >= steps // 2
    assert all(r["train/is_ratio_clip_frac"] < 0.05 for r in trained)  # TIS weighs the stale tokens; few reach its cap
    first, last = (sum(r["reward/mean"] for r in part) / len(part) for part in (trained[:5], trained[-5:]))
    assert last >= first + 0.05, (first, last)
