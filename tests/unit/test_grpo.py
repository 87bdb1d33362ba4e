import torch

from flywheel.algorithms.grpo import grpo_advantages


def test_grpo_group_normalised_with_sample_std():
    # group 1 rewards [1, 0, 0, 1]: mean 0.5, deviations ±0.5, sample variance (4 * 0.25) / 3 = 1/3,
    #   std = 0.57735; advantages ±0.5 / 0.57735 = ±0.866025
    # group 2 rewards [1, 0, 0, 0]: mean 0.25, deviations [0.75, -0.25, -0.25, -0.25],
    #   sample variance (0.5625 + 3 * 0.0625) / 3 = 0.25, std 0.5; advantages [1.5, -0.5, -0.5, -0.5]
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    adv = grpo_advantages(rewards, eps=0.0)
    expected = torch.tensor([[0.866025, -0.866025, -0.866025, 0.866025], [1.5, -0.5, -0.5, -0.5]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_grpo_without_std_only_centres():
    # rewards [2, 0, 1]: mean 1 -> [1, -1, 0]
    adv = grpo_advantages(torch.tensor([[2.0, 0.0, 1.0]]), scale_by_std=False)
    assert adv.tolist() == [[1.0, -1.0, 0.0]]


def test_grpo_equal_rewards_give_zero_advantage():
    adv = grpo_advantages(torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    assert adv.abs().max().item() == 0.0
