"""A trainer rank whose process dies mid-run: without the supervisor the run ends with one sentence
naming the rank, the step and the checkpoint; with it, the run resumes from that checkpoint in the
same run directory and its steps after the restart equal those of an uninterrupted run."""

import os
from pathlib import Path

import pytest

from flywheel.config import load_config
from flywheel.controller import TrainerLost, train
from flywheel.monitor.metrics import read_metrics
from flywheel.supervisor import supervise
from flywheel.trainer.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]
COMPARED = ("reward/mean", "loss/policy", "train/grad_norm", "train/entropy", "eval/accuracy", "weights/version")


def dying_trainer(marker: Path, step: int) -> type[Trainer]:
    """Rank 1's process exits in the middle of training step ``step``, once: it leaves ``marker``
    behind, so the restarted group trains on. Defined here so that Ray ships it by value."""

    class DyingTrainer(Trainer):
        def train_step(self, parts):
            if self.rank == 1 and self.version == step - 1 and not marker.exists():
                marker.touch()
                os._exit(1)  # rank 0 is in the step's first collective with it
            return super().train_step(parts)

    return DyingTrainer


def run_config(tmp_path: Path, *extra: str):
    common = ["run.steps=4", "run.checkpoint_every=2", "eval.every=2", "run.progress=false", "rollout.prompts_per_step=16"]
    return load_config(REPO / "configs/quickstart.yaml", [*common, "trainer.ranks=2", "trainer.threads=1", f"run.output_dir={tmp_path}", *extra])


def test_a_dead_rank_ends_the_run_naming_the_checkpoint(shared_engine, tmp_path):
    config = run_config(tmp_path, "run.name=lost")
    with pytest.raises(TrainerLost) as lost:
        supervise(
            config.model_copy(update={"run": config.run.model_copy(update={"supervise": True, "max_restarts": 0})}),
            [shared_engine],
            dying_trainer(tmp_path / "died", 3),
        )
    run_dir = tmp_path / "lost"
    assert str(lost.value) == (
        f"trainer rank 1 died at step 3 (during train_step); its latest checkpoint is {run_dir / 'checkpoints/step_2'}: continue with run.resume={run_dir}"
    )
    assert [row["step"] for row in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2]
    assert not (run_dir / "restarts.log").exists()


def test_the_supervisor_resumes_exactly_after_a_rank_dies(shared_engine, fresh_workers, tmp_path):
    supervised = supervise(
        run_config(tmp_path, "run.name=supervised", "run.supervise=true", "run.max_restarts=1"), [shared_engine], dying_trainer(tmp_path / "died", 3)
    )
    [restart] = (supervised / "restarts.log").read_text().splitlines()
    assert "restart 1 of 1: trainer rank 1 died at step 3 (during train_step)" in restart
    whole = train(run_config(tmp_path, "run.name=whole"), fresh_workers(run_config(tmp_path)))

    expected, got = read_metrics(whole / "metrics.jsonl"), read_metrics(supervised / "metrics.jsonl")
    assert [r["step"] for r in got] == [0, 1, 2, 3, 4]
    for want, have in zip(expected[3:], got[3:]):
        for key in COMPARED:
            if key in want:
                assert have[key] == want[key], (want["step"], key, want[key], have[key])
