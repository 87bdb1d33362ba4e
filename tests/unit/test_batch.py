"""build_batch: the glue from scored groups to a TrainBatch (sequence estimators need no workers)."""

import asyncio

import torch

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.config import load_config
from flywheel.types import Completion, Episode


def episode(prompt: list[int], tokens: list[int], reward: float, truncated: bool = False) -> Episode:
    logprobs = [-0.5] * len(tokens)
    return Episode(prompt, Completion(tokens, logprobs, "", weight_versions=(3,) * len(tokens), truncated=truncated), reward)


def test_grpo_batch_broadcasts_advantages_and_filters_truncated_completions():
    config = load_config(None, ["rollout.group_size=2", "algorithm.name=dapo"])
    groups = [[episode([4, 5], [6, 1], 1.0), episode([4, 5], [7, 7, 7], 0.0, truncated=True)]]
    batch = asyncio.run(build_batch(groups, make_algorithm(config.algorithm), pad_id=0, trainer=None))
    # rows: [4, 5, 6, 1, pad] and [4, 5, 7, 7, 7]; completion positions 2-3 and 2-4
    assert batch.tokens.tolist() == [[4, 5, 6, 1, 0], [4, 5, 7, 7, 7]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    # GRPO on [1, 0]: mean 0.5, sample std 0.7071 -> advantages +-0.7071 on each completion token
    torch.testing.assert_close(batch.advantages[0], torch.tensor([0, 0, 0.7071068, 0.7071068, 0]), atol=1e-5, rtol=0)
    torch.testing.assert_close(batch.advantages[1], torch.tensor([0, 0, -0.7071068, -0.7071068, -0.7071068]), atol=1e-5, rtol=0)
    # DAPO's overlong filter: the truncated completion is left out of the loss
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 0, 0]]
    assert batch.behaviour_logprobs[0].tolist() == [0, 0, -0.5, -0.5, 0]
