import math

import torch

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.cispo import cispo_loss

# logprobs [-1, -2, -0.5], ratios r = [2, 0.5, 1], advantages [1, -1, 2]
LOGPROBS = torch.tensor([[-1.0, -2.0, -0.5]])
OLD = LOGPROBS - torch.tensor([[math.log(2.0), math.log(0.5), 0.0]])
ADV = torch.tensor([[1.0, -1.0, 2.0]])
MASK = torch.ones(1, 3)


def test_cispo_value_without_lower_bound():
    # clip_high 0.28, no lower bound: w = [min(2, 1.28), 0.5, 1] = [1.28, 0.5, 1]
    # loss_t = -w_t * A_t * logprob_t: [-1.28 * 1 * -1, -0.5 * -1 * -2, -1 * 2 * -0.5] = [1.28, -1.0, 1.0]
    # clip_frac = 1/3 (t0); ratio/mean = (2 + 0.5 + 1) / 3 = 7/6
    loss, metrics = cispo_loss(LOGPROBS, OLD, ADV, MASK, clip_low=None, clip_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([[1.28, -1.0, 1.0]]), atol=1e-6, rtol=0)
    assert abs(metrics["loss/clip_frac"] - 1 / 3) < 1e-6
    assert abs(metrics["loss/ratio_mean"] - 7 / 6) < 1e-6


def test_cispo_value_with_lower_bound():
    # clip_low 0.2: w_1 = max(0.5, 0.8) = 0.8 -> loss_1 = -0.8 * -1 * -2 = -1.6; clip_frac = 2/3
    loss, metrics = cispo_loss(LOGPROBS, OLD, ADV, MASK, clip_low=0.2, clip_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([[1.28, -1.6, 1.0]]), atol=1e-6, rtol=0)
    assert abs(metrics["loss/clip_frac"] - 2 / 3) < 1e-6


def test_cispo_clipped_token_keeps_its_gradient():
    # the weight is detached, so d token_mean(loss) / d logprob_t = -w_t * A_t / 3 for every token, clipped or not:
    #   t0 (clipped, w = 1.28): -1.28 * 1 / 3 = -0.4266667
    #   t1: -0.5 * -1 / 3 = 0.1666667;  t2: -1 * 2 / 3 = -0.6666667
    logprobs = LOGPROBS.clone().requires_grad_(True)
    loss, _ = cispo_loss(logprobs, OLD, ADV, MASK, clip_low=None, clip_high=0.28)
    token_mean(loss, MASK).backward()
    expected = torch.tensor([[-1.28 / 3, 0.5 / 3, -2.0 / 3]])
    torch.testing.assert_close(logprobs.grad, expected, atol=1e-6, rtol=0)
