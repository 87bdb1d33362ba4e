"""The trainer on the shipped tiny model, in process: a non-finite loss is reported and never applied."""

import math
from pathlib import Path

import torch

from flywheel.config import load_config
from flywheel.trainer.trainer import Trainer
from flywheel.types import TrainBatch
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def batch(advantage: float) -> TrainBatch:
    tokens = torch.tensor([[4, 5, 6, 1], [4, 5, 7, 1]])
    mask = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    return TrainBatch(tokens, torch.ones_like(tokens), mask, torch.zeros(2, 4), torch.full((2, 4), advantage) * mask)


def test_nonfinite_step_is_skipped_and_weights_unchanged(tmp_path):
    trainer = Trainer(load_config(REPO / "configs/quickstart.yaml", ["trainer.minibatches=1"]), FileTransport(tmp_path))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.train_step(batch(math.nan))
    assert metrics["train/nonfinite_skipped"] == 1.0
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())

    metrics = trainer.train_step(batch(1.0))
    assert metrics["train/nonfinite_skipped"] == 0.0 and math.isfinite(metrics["loss"])
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
