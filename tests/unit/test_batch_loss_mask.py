"""collate / build_batch with multi-turn completions: environment tokens are in the sequence but not in the loss."""

import asyncio

import torch

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.config import load_config
from flywheel.types import Completion, Episode, collate


def test_loss_mask_of_a_multi_turn_completion_is_honoured():
    # completion = model [6, 7] (logprobs -0.5, -0.25), env [8, 9] (mask 0, logprob 0), model [1] (-0.125)
    multi = Completion([6, 7, 8, 9, 1], [-0.5, -0.25, 0.0, 0.0, -0.125], "", weight_versions=(2, 2, None, None, 2), loss_mask=(1, 1, 0, 0, 1))
    single = Completion([6, 1], [-1.0, -2.0], "", weight_versions=(2, 2))  # loss_mask None: all model tokens
    config = load_config(None, ["rollout.group_size=2"])
    batch = asyncio.run(
        build_batch([[Episode([4, 5], multi, 1.0), Episode([4, 5], single, 0.0)]], make_algorithm(config.algorithm), pad_id=0, trainer=None)
    )
    assert batch.tokens.tolist() == [[4, 5, 6, 7, 8, 9, 1], [4, 5, 6, 1, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1] * 7, [1, 1, 1, 1, 0, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 0, 0, 0]]
    assert batch.behaviour_logprobs.tolist() == [[0, 0, -0.5, -0.25, 0, 0, -0.125], [0, 0, -1.0, -2.0, 0, 0, 0]]
    # GRPO on rewards [1, 0]: +-0.7071 on the trained tokens only, 0 on the environment's
    a = 0.7071068
    torch.testing.assert_close(batch.advantages, torch.tensor([[0, 0, a, a, 0, 0, a], [0, 0, -a, -a, 0, 0, 0]]), atol=1e-5, rtol=0)


def test_collate_without_loss_masks_is_unchanged():
    batch = collate([Episode([3], Completion([4, 1], [-0.5, -0.5], "", (0, 0)), 1.0)], pad_id=0)
    assert batch.loss_mask.tolist() == [[0, 1, 1]]
