import math

import pytest
import torch

from flywheel.algorithms.aggregation import aggregate
from flywheel.algorithms.cispo import cispo_loss
from flywheel.algorithms.gspo import gspo_loss
from flywheel.algorithms.ppo_clip import ppo_clip_loss

LOSSES = {
    "ppo_clip": lambda lp, old, adv, mask: ppo_clip_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.28),
    "ppo_clip_dual": lambda lp, old, adv, mask: ppo_clip_loss(lp, old, adv, mask, 0.2, 0.2, dual_clip=3.0),
    "gspo": lambda lp, old, adv, mask: gspo_loss(lp, old, adv, mask, clip_low=3e-4, clip_high=4e-4),
    "cispo": lambda lp, old, adv, mask: cispo_loss(lp, old, adv, mask, clip_low=None, clip_high=0.28),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean"])
def test_zero_advantage_gives_exactly_zero_gradient(name, mode):
    # every loss is a product with A; with A = 0 each token's gradient is (something finite) * 0 = 0 exactly,
    # whether or not the ratios (exp of [ln 2, ln 0.5, 0, ln 5]) are clipped
    logprobs = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -4.0, -1.5]], requires_grad=True)
    old = logprobs.detach() - torch.tensor([[math.log(2.0), math.log(0.5), 0.0], [0.0, math.log(5.0), 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    loss, _ = LOSSES[name](logprobs, old, torch.zeros(2, 3), mask)
    aggregate(loss, mask, mode).backward()
    assert logprobs.grad is not None
    assert logprobs.grad.abs().max().item() == 0.0
