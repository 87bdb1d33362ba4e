"""A run stopped after a checkpoint and resumed with run.resume continues exactly as the uninterrupted run,
with one trainer rank or two (sharded checkpoints)."""

import json
from pathlib import Path

import pytest
from helpers import SYNC, undocumented_metrics

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]
COMMON = ["run.checkpoint_every=2", "eval.every=2", "run.progress=false", "rollout.prompts_per_step=16", "run.dump_rollouts=true"]


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rows(run_dir: Path) -> list[dict]:
    return rows_of(run_dir / "metrics.jsonl")


@pytest.mark.parametrize("ranks", [1, 2])
def test_resume_is_exact(fresh_workers, tmp_path, ranks):
    def config(*extra):
        return load_config(
            REPO / "configs/quickstart.yaml", [*SYNC, *COMMON, f"run.output_dir={tmp_path}", f"trainer.ranks={ranks}", "trainer.threads=1", *extra]
        )

    # PPO: the resume must restore the critic and both optimisers too.
    whole = train(config("run.steps=4", "run.name=whole", "algorithm.name=ppo"), fresh_workers(config("algorithm.name=ppo")))
    # "Stopped" after step 3, with its last checkpoint at step 2: row 3 must be recomputed.
    cut = train(config("run.steps=3", "run.name=cut", "algorithm.name=ppo"), fresh_workers(config("algorithm.name=ppo")))
    assert [r["step"] for r in rows(cut)] == [0, 1, 2, 3]
    resumed = config("run.steps=4", f"run.resume={cut}", "algorithm.name=ppo")
    assert train(resumed, fresh_workers(resumed)) == cut

    expected, got = rows(whole), rows(cut)
    assert not undocumented_metrics(expected), undocumented_metrics(expected)  # PPO's critic metrics too
    assert [r["step"] for r in got] == [0, 1, 2, 3, 4]
    for want, have in zip(expected[3:], got[3:]):
        for key in ("reward/mean", "loss/policy", "train/grad_norm", "train/entropy", "loss/critic", "eval/accuracy", "weights/version"):
            if key in want:
                assert have[key] == want[key], (want["step"], key, want[key], have[key])

    # every prompt trained exactly once, on the same tokens: the steps redone after the checkpoint replaced theirs
    def trained(run_dir: Path) -> list[tuple]:
        return [(r["position"], r["trainer_version"], r["token_ids"]) for r in rows_of(run_dir / "rollouts.jsonl") if r["fate"] == "trained"]

    assert trained(cut) == trained(whole) and len(trained(whole)) == 4 * 16
