import pytest
import torch

from flywheel.algorithms.rloo import rloo_advantages


def test_rloo_leave_one_out_baseline():
    # group [1, 0, 0, 1]: sum 2; r_0 = 1 has baseline (2 - 1) / 3 = 1/3 -> 2/3; r_1 = 0 has baseline 2/3 -> -2/3
    # group [1, 1, 0, 0]: the same by symmetry -> [2/3, 2/3, -2/3, -2/3]
    adv = rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]))
    t = 2 / 3
    expected = torch.tensor([[t, -t, -t, t], [t, t, -t, -t]])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)


def test_rloo_three_samples():
    # group [3, 1, 2]: sum 6; 3 - (1 + 2) / 2 = 1.5; 1 - (3 + 2) / 2 = -1.5; 2 - (3 + 1) / 2 = 0
    # (equal to n / (n - 1) = 3/2 times the centred rewards [1, -1, 0])
    adv = rloo_advantages(torch.tensor([[3.0, 1.0, 2.0]]))
    assert adv.tolist() == [[1.5, -1.5, 0.0]]


def test_rloo_equal_rewards_give_zero():
    assert rloo_advantages(torch.tensor([[0.5, 0.5]])).tolist() == [[0.0, 0.0]]


def test_rloo_needs_two_samples():
    with pytest.raises(ValueError, match="at least 2"):
        rloo_advantages(torch.tensor([[1.0], [0.0]]))
