import pytest
import torch

from flywheel.algorithms.grpo import grpo_advantages

REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]])


def test_grpo_group_normalised_with_sample_std():
    # group 1 rewards [1, 0, 0, 1]: mean 0.5, deviations ±0.5, sample variance (4 * 0.25) / 3 = 1/3,
    #   std = 0.57735; advantages ±0.5 / 0.57735 = ±0.866025
    # group 2 rewards [1, 0, 0, 0]: mean 0.25, deviations [0.75, -0.25, -0.25, -0.25],
    #   sample variance (0.5625 + 3 * 0.0625) / 3 = 0.25, std 0.5; advantages [1.5, -0.5, -0.5, -0.5]
    adv = grpo_advantages(REWARDS, eps=0.0)
    expected = torch.tensor([[0.866025, -0.866025, -0.866025, 0.866025], [1.5, -0.5, -0.5, -0.5]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_grpo_batch_std_scaling():
    # group-centred: [0.5, -0.5, -0.5, 0.5] and [0.75, -0.25, -0.25, -0.25] (as above)
    # all 8 rewards: mean 3/8; sum of squared deviations = sum r^2 - 8 * mean^2 = 3 - 8 * 9/64 = 1.875,
    #   sample variance 1.875 / 7 = 15/56, std sqrt(15/56) = 0.5175492
    # advantages: 0.5 / 0.5175492 = 0.9660918, 0.75 / 0.5175492 = 1.4491377, 0.25 / 0.5175492 = 0.4830459
    adv = grpo_advantages(REWARDS, std_scale="batch", eps=0.0)
    expected = torch.tensor([[0.9660918, -0.9660918, -0.9660918, 0.9660918], [1.4491377, -0.4830459, -0.4830459, -0.4830459]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_grpo_without_std_only_centres():
    # rewards [2, 0, 1]: mean 1 -> [1, -1, 0] (Dr. GRPO)
    adv = grpo_advantages(torch.tensor([[2.0, 0.0, 1.0]]), std_scale="none")
    assert adv.tolist() == [[1.0, -1.0, 0.0]]


@pytest.mark.parametrize("std_scale", ["group", "batch", "none"])
def test_grpo_equal_rewards_give_zero_advantage(std_scale):
    adv = grpo_advantages(torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), std_scale=std_scale)
    assert adv.abs().max().item() == 0.0


def test_grpo_unknown_std_scale_is_rejected():
    with pytest.raises(ValueError, match="std_scale"):
        grpo_advantages(REWARDS, std_scale="global")
