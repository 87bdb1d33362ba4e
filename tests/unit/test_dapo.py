import pytest
import torch

from flywheel.algorithms.dapo import informative_groups, overlong_penalty


def test_overlong_penalty_soft_ramp():
    # max_tokens 10, buffer 4 -> the ramp starts after 10 - 4 = 6 tokens; factor 0.5
    #   L = 3, 6: <= 6 -> 0
    #   L = 7:  (6 - 7) / 4 * 0.5 = -0.125
    #   L = 10: (6 - 10) / 4 * 0.5 = -0.5
    #   L = 11: > 10 -> -0.5
    lengths = torch.tensor([3, 6, 7, 10, 11])
    penalty = overlong_penalty(lengths, max_tokens=10, buffer=4, factor=0.5)
    assert penalty.tolist() == [0.0, 0.0, -0.125, -0.5, -0.5]


def test_overlong_penalty_default_factor():
    # factor 1: L = 8 -> (6 - 8) / 4 = -0.5; L = 12 -> -1
    assert overlong_penalty(torch.tensor([8, 12]), max_tokens=10, buffer=4).tolist() == [-0.5, -1.0]


def test_overlong_penalty_rejects_bad_buffer():
    with pytest.raises(ValueError, match="buffer"):
        overlong_penalty(torch.tensor([5]), max_tokens=10, buffer=0)


def test_informative_groups_keep_mixed_rewards():
    # all-equal groups ([1, 1, 1], [0, 0, 0]) give zero GRPO advantage and are dropped
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 1.0]])
    assert informative_groups(rewards).tolist() == [False, True, False, True]
