import torch

from flywheel.algorithms.reinforce_pp import reinforce_pp_advantages, reinforce_pp_baseline_advantages

REWARDS = torch.tensor([[1.0, 0.0], [1.0, 1.0]])


def test_global_normalisation():
    # all 4 rewards: mean 0.75, deviations [0.25, -0.75, 0.25, 0.25],
    # squared 0.0625 + 0.5625 + 0.0625 + 0.0625 = 0.75, sample variance 0.75 / 3 = 0.25, std 0.5
    # advantages [0.5, -1.5, 0.5, 0.5]; the all-correct group keeps a positive advantage
    adv = reinforce_pp_advantages(REWARDS, eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[0.5, -1.5], [0.5, 0.5]]), atol=1e-6, rtol=0)


def test_group_baseline_then_batch_std():
    # group means [0.5, 1]: centred [0.5, -0.5, 0, 0] (mean 0), squares sum 0.5,
    # sample variance 0.5 / 3 = 1/6, std 0.4082483; advantages ±0.5 / 0.4082483 = ±1.2247449, and 0, 0
    adv = reinforce_pp_baseline_advantages(REWARDS, eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[1.2247449, -1.2247449], [0.0, 0.0]]), atol=1e-6, rtol=0)


def test_equal_rewards_give_zero():
    rewards = torch.ones(2, 3)
    assert reinforce_pp_advantages(rewards).abs().max().item() == 0.0
    assert reinforce_pp_baseline_advantages(rewards).abs().max().item() == 0.0
