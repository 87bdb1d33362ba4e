import math

import torch

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.ppo_clip import ppo_clip_loss


def test_ppo_clip_loss_exact_values():
    # One sequence, four tokens, the last masked out (padding); eps = 0.2.
    # ratios r = exp(new - old) = [1.5, 0.5, 1.0, (masked)], advantages A = [2, -1, 3, 7].
    #   t0: A > 0, r = 1.5 clipped to 1.2: min(1.5*2, 1.2*2) = 2.4          -> clipped
    #   t1: A < 0, r = 0.5 clipped to 0.8: min(0.5*-1, 0.8*-1) = -0.8       -> clipped
    #   t2: r = 1.0 inside the band: min(3, 3) = 3                           -> not clipped
    # loss = -(2.4 - 0.8 + 3) / 3 tokens = -4.6 / 3 = -1.533333; clip_frac = 2 / 3
    old = torch.zeros(1, 4)
    new = torch.tensor([[math.log(1.5), math.log(0.5), 0.0, 5.0]])
    adv = torch.tensor([[2.0, -1.0, 3.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, metrics = ppo_clip_loss(new, old, adv, mask, clip_eps=0.2)
    assert abs(loss.item() - (-4.6 / 3)) < 1e-6
    assert abs(metrics["clip_frac"] - 2 / 3) < 1e-6
    # ratio/mean over unmasked tokens: (1.5 + 0.5 + 1.0) / 3 = 1.0
    assert abs(metrics["ratio/mean"] - 1.0) < 1e-6


def test_ppo_clip_gradient_is_cut_where_clipped():
    # d loss / d new_t = -A_t * r_t / n_tokens where unclipped, 0 where clipped.
    # t0 clipped (r=1.5, A=2) -> 0; t1 unclipped (r=1.1, A=1) -> -1 * 1.1 / 2 = -0.55
    new = torch.tensor([[math.log(1.5), math.log(1.1)]], requires_grad=True)
    loss, _ = ppo_clip_loss(new, torch.zeros(1, 2), torch.tensor([[2.0, 1.0]]), torch.ones(1, 2), clip_eps=0.2)
    loss.backward()
    torch.testing.assert_close(new.grad, torch.tensor([[0.0, -0.55]]), atol=1e-6, rtol=0)


def test_token_mean_weighs_every_token_equally():
    # a short sequence (1 token, value 4) and a long one (3 tokens, value 0 each):
    # token-mean = (4 + 0 + 0 + 0) / 4 = 1.0 (a sequence mean would give (4 + 0) / 2 = 2.0)
    values = torch.tensor([[4.0, 9.0, 9.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert token_mean(values, mask).item() == 1.0
