import torch

from flywheel.algorithms.gae import gae_advantages

# Row 0: a prompt position, 3 completion tokens, one padding position (9s outside the mask must not count).
# Row 1: 2 completion tokens then padding.
REWARDS = torch.tensor([[9.0, 0.0, 0.0, 1.0, 9.0], [0.0, 2.0, 9.0, 9.0, 9.0]])
VALUES = torch.tensor([[9.0, 0.5, 0.25, 0.75, 9.0], [1.0, 1.0, 9.0, 9.0, 9.0]])
MASK = torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0]])


def test_gae_gamma_1_lambda_1_is_monte_carlo_return_minus_value():
    # row 0, V after the last token = 0:
    #   delta_3 = 1 + 0 - 0.75 = 0.25;  delta_2 = 0 + 0.75 - 0.25 = 0.5;  delta_1 = 0 + 0.25 - 0.5 = -0.25
    #   A_3 = 0.25;  A_2 = 0.5 + 0.25 = 0.75;  A_1 = -0.25 + 0.75 = 0.5  (= return 1 minus V)
    #   returns = A + V = [1, 1, 1]
    # row 1: delta_1 = 2 + 0 - 1 = 1;  delta_0 = 0 + 1 - 1 = 0;  A = [0 + 1, 1] = [1, 1];  returns [2, 2]
    adv, ret = gae_advantages(REWARDS, VALUES, MASK, gamma=1.0, lam=1.0)
    assert adv.tolist() == [[0.0, 0.5, 0.75, 0.25, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0]]
    assert ret.tolist() == [[0.0, 1.0, 1.0, 1.0, 0.0], [2.0, 2.0, 0.0, 0.0, 0.0]]


def test_gae_gamma_half_lambda_half():
    # gamma * lam = 0.25
    # row 0: delta_3 = 1 + 0.5 * 0 - 0.75 = 0.25;  delta_2 = 0 + 0.5 * 0.75 - 0.25 = 0.125;
    #        delta_1 = 0 + 0.5 * 0.25 - 0.5 = -0.375
    #   A_3 = 0.25;  A_2 = 0.125 + 0.25 * 0.25 = 0.1875;  A_1 = -0.375 + 0.25 * 0.1875 = -0.328125
    #   returns = [-0.328125 + 0.5, 0.1875 + 0.25, 0.25 + 0.75] = [0.171875, 0.4375, 1.0]
    # row 1: delta_1 = 2 - 1 = 1;  delta_0 = 0 + 0.5 * 1 - 1 = -0.5;  A_0 = -0.5 + 0.25 * 1 = -0.25
    #   returns = [-0.25 + 1, 1 + 1] = [0.75, 2.0]
    adv, ret = gae_advantages(REWARDS, VALUES, MASK, gamma=0.5, lam=0.5)
    assert adv.tolist() == [[0.0, -0.328125, 0.1875, 0.25, 0.0], [-0.25, 1.0, 0.0, 0.0, 0.0]]
    assert ret.tolist() == [[0.0, 0.171875, 0.4375, 1.0, 0.0], [0.75, 2.0, 0.0, 0.0, 0.0]]


def test_gae_carries_no_gradient():
    values = VALUES.clone().requires_grad_(True)
    adv, ret = gae_advantages(REWARDS, values, MASK, gamma=1.0, lam=0.95)
    assert not adv.requires_grad and not ret.requires_grad


def test_masked_whiten_uses_only_masked_entries():
    # masked-in values [1, 3] (the 100 is outside the mask): mean 2, population std 1 -> [-1, 1], 0 elsewhere
    from flywheel.algorithms.gae import masked_whiten

    out = masked_whiten(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[1.0, 1.0, 0.0]]), eps=0.0)
    assert out.tolist() == [[-1.0, 1.0, 0.0]]


def test_terminal_rewards_sit_on_each_rows_last_completion_token():
    # row 0: completion at positions 1-2 -> reward 5 at position 2; row 1: completion at 2-3 -> reward -1 at 3
    from flywheel.algorithms.gae import terminal_rewards

    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    out = terminal_rewards(torch.tensor([5.0, -1.0]), mask)
    assert out.tolist() == [[0.0, 0.0, 5.0, 0.0], [0.0, 0.0, 0.0, -1.0]]
