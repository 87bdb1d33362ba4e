import math

import pytest
import torch

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.ppo_clip import ppo_clip_loss


def logs(*ratios: float) -> torch.Tensor:
    return torch.tensor([[math.log(r) for r in ratios]])


def test_ppo_clip_symmetric_exact_values():
    # One sequence, four tokens, the last masked out (padding); clip_low = clip_high = 0.2.
    # ratios r = exp(new - old) = [1.5, 0.5, 1.0, (masked)], advantages A = [2, -1, 3, 7].
    #   t0: A > 0, r = 1.5 clipped to 1.2: min(1.5*2, 1.2*2) = 2.4          -> clipped
    #   t1: A < 0, r = 0.5 clipped to 0.8: min(0.5*-1, 0.8*-1) = -0.8       -> clipped
    #   t2: r = 1.0 inside the band: min(3, 3) = 3                           -> not clipped
    # per-token loss [-2.4, 0.8, -3, 0]; token-mean = -(2.4 - 0.8 + 3) / 3 = -4.6 / 3; clip_frac = 2 / 3
    old = torch.zeros(1, 4)
    new = torch.tensor([[math.log(1.5), math.log(0.5), 0.0, 5.0]])
    adv = torch.tensor([[2.0, -1.0, 3.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, metrics = ppo_clip_loss(new, old, adv, mask, clip_low=0.2, clip_high=0.2)
    torch.testing.assert_close(loss, torch.tensor([[-2.4, 0.8, -3.0, 0.0]]), atol=1e-6, rtol=0)
    assert abs(token_mean(loss, mask).item() - (-4.6 / 3)) < 1e-6
    assert abs(metrics["loss/clip_frac"] - 2 / 3) < 1e-6
    assert metrics["loss/dual_clip_frac"] == 0.0
    # ratio/mean over unmasked tokens: (1.5 + 0.5 + 1.0) / 3 = 1.0
    assert abs(metrics["loss/ratio_mean"] - 1.0) < 1e-6


def test_ppo_clip_higher_widens_only_the_upper_bound():
    # ratios [1.5, 1.25, 0.5, 0.75], A = [1, 1, -1, -1]; clip_low 0.2, clip_high 0.28 -> band [0.8, 1.28]
    #   t0: min(1.5, 1.28) = 1.28         -> clipped, loss -1.28
    #   t1: 1.25 inside the band         -> not clipped, loss -1.25 (a symmetric 0.2 would clip it to 1.2)
    #   t2: min(-0.5, -0.8) = -0.8         -> clipped, loss 0.8
    #   t3: min(-0.75, -0.8) = -0.8        -> clipped, loss 0.8 (the lower bound is still 0.8)
    new = logs(1.5, 1.25, 0.5, 0.75).requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, metrics = ppo_clip_loss(new, torch.zeros(1, 4), adv, mask, clip_low=0.2, clip_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([[-1.28, -1.25, 0.8, 0.8]]), atol=1e-6, rtol=0)
    assert abs(metrics["loss/clip_frac"] - 3 / 4) < 1e-6
    # d loss_t / d new_t = -A_t * r_t where unclipped: only t1, -1 * 1.25
    loss.sum().backward()
    torch.testing.assert_close(new.grad, torch.tensor([[0.0, -1.25, 0.0, 0.0]]), atol=1e-6, rtol=0)
    # the same tokens with symmetric bounds: t1 is clipped too -> clip_frac 4 / 4
    _, symmetric = ppo_clip_loss(new.detach(), torch.zeros(1, 4), adv, mask, clip_low=0.2, clip_high=0.2)
    assert abs(symmetric["loss/clip_frac"] - 1.0) < 1e-6


def test_ppo_dual_clip_caps_negative_advantages():
    # (r, A) = [(4, -1), (2, -1), (4, 1), (1, -2)], band [0.8, 1.2], dual_clip c = 3
    #   t0: -min(-4, -1.2) = 4  > cap -c*A = 3  -> loss 3, dual clip active, no gradient
    #   t1: -min(-2, -1.2) = 2  <= cap 3         -> loss 2, gradient -A * r = 2
    #   t2: A > 0: -min(4, 1.2) = -1.2           -> clipped (clipped 1.2 < unclipped 4), no cap for A > 0
    #   t3: r = 1 inside the band: 2 <= cap 6    -> loss 2, gradient -A * r = 2
    # clip_frac = 1/4 (t2 only: for t0 and t1 the clipped term -1.2 is the larger); dual_clip_frac = 1/4 (t0)
    new = logs(4.0, 2.0, 4.0, 1.0).requires_grad_(True)
    adv = torch.tensor([[-1.0, -1.0, 1.0, -2.0]])
    loss, metrics = ppo_clip_loss(new, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.2, dual_clip=3.0)
    torch.testing.assert_close(loss, torch.tensor([[3.0, 2.0, -1.2, 2.0]]), atol=1e-6, rtol=0)
    assert abs(metrics["loss/clip_frac"] - 1 / 4) < 1e-6
    assert abs(metrics["loss/dual_clip_frac"] - 1 / 4) < 1e-6
    loss.sum().backward()
    torch.testing.assert_close(new.grad, torch.tensor([[0.0, 2.0, 0.0, 2.0]]), atol=1e-6, rtol=0)
    # without the dual clip t0 keeps its full loss -min(-4, -1.2) = 4
    plain, _ = ppo_clip_loss(new.detach(), torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.2)
    assert abs(plain[0, 0].item() - 4.0) < 1e-6


def test_ppo_dual_clip_must_exceed_one():
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clip_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), 0.2, 0.2, dual_clip=1.0)


def test_ppo_clip_gradient_is_cut_where_clipped():
    # d token_mean(loss) / d new_t = -A_t * r_t / n_tokens where unclipped, 0 where clipped.
    # t0 clipped (r=1.5, A=2) -> 0; t1 unclipped (r=1.1, A=1) -> -1 * 1.1 / 2 = -0.55
    new = logs(1.5, 1.1).requires_grad_(True)
    mask = torch.ones(1, 2)
    loss, _ = ppo_clip_loss(new, torch.zeros(1, 2), torch.tensor([[2.0, 1.0]]), mask, clip_low=0.2, clip_high=0.2)
    token_mean(loss, mask).backward()
    torch.testing.assert_close(new.grad, torch.tensor([[0.0, -0.55]]), atol=1e-6, rtol=0)
