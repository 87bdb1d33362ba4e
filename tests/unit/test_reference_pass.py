"""The frozen reference model runs once per token of a step, wherever the KL is placed: in the reward
(build_batch's sequence KL, and none inside the loss) or in the loss (inside train_step only). A
forward hook on the real reference model of an in-process trainer counts the tokens it is fed."""

import asyncio
from pathlib import Path

import pytest
import torch

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.config import load_config
from flywheel.trainer.trainer import Trainer
from flywheel.types import Completion, Episode
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


class InProcessGroup:
    """What build_batch asks of a TrainerGroup, answered by one in-process rank."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    async def sequence_kl(self, batch):
        return self.trainer.sequence_kl(batch)


def groups() -> list[list[Episode]]:
    """Two groups of two equal-length episodes (no padding: every fed position is a real token)."""

    def episode(tokens: list[int], reward: float) -> Episode:
        return Episode([4, 5], Completion(tokens, [-0.5] * len(tokens), "", weight_versions=(0,) * len(tokens)), reward)

    return [[episode([6, 7, 1], 1.0), episode([8, 9, 1], 0.0)], [episode([7, 6, 1], 0.0), episode([9, 9, 1], 1.0)]]


@pytest.mark.parametrize("placement", ["reward", "loss"])
def test_the_reference_model_runs_once_per_token(tmp_path, placement):
    config = load_config(
        REPO / "configs/quickstart.yaml",
        ["rollout.group_size=2", "algorithm.kl_beta=0.5", f"algorithm.kl_placement={placement}", "trainer.minibatches=1"],
    )
    trainer = Trainer(config, FileTransport(tmp_path))
    algorithm = make_algorithm(config.algorithm)
    fed: list[int] = []
    trainer.reference.register_forward_hook(lambda module, args, kwargs, out: fed.append(kwargs["input_ids"].numel()), with_kwargs=True)
    with torch.no_grad():  # a policy away from the reference, so that the KL is not zero
        for parameter in trainer.model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))

    batch = asyncio.run(build_batch(groups(), algorithm, pad_id=0, trainer=InProcessGroup(trainer)))
    built = sum(fed)
    result = trainer.train_step([batch])

    tokens = 4 * 5  # 4 rows of 2 prompt + 3 completion tokens
    assert (built, sum(fed)) == ((tokens, tokens) if placement == "reward" else (0, tokens))
    assert result.metrics["loss/kl_reference"] > 0.01


def test_a_kl_in_the_reward_is_reported_as_the_token_mean_it_charged(tmp_path):
    """loss/kl_reference of a step whose KL is in the reward: the sequence KL's sum over the loss
    tokens, divided by their count (12: 4 episodes of 3 completion tokens)."""
    config = load_config(REPO / "configs/quickstart.yaml", ["rollout.group_size=2", "algorithm.kl_beta=0.5", "algorithm.kl_placement=reward"])
    trainer = Trainer(config, FileTransport(tmp_path))
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    batch = asyncio.run(build_batch(groups(), make_algorithm(config.algorithm), pad_id=0, trainer=InProcessGroup(trainer)))
    charged = trainer.sequence_kl(batch)  # the same policy and rows: the sums build_batch charged
    result = trainer.train_step(batch.split(2))
    assert result.metrics["loss/kl_reference"] == pytest.approx(charged.sum().item() / 12, rel=1e-6)
