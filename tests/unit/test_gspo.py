import math

import torch

from flywheel.algorithms.aggregation import aggregate
from flywheel.algorithms.gspo import gspo_loss

# Sequence 0: 2 tokens (third position is padding), log ratios [ln 4, 0] -> s_0 = exp(ln 4 / 2) = 2, A_0 = 1.
# Sequence 1: 3 tokens, log ratios [0.1, -0.1, 0.3] -> s_1 = exp(0.3 / 3) = exp(0.1) = 1.1051709, A_1 = -2.
OLD = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -1.5, -2.5]])
LOG_RATIO = torch.tensor([[math.log(4.0), 0.0, 7.0], [0.1, -0.1, 0.3]])
ADV = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
CLIP = 0.5  # band [0.5, 1.5]


def test_gspo_value_and_metrics():
    # seq 0: -min(2 * 1, 1.5 * 1) = -1.5 on each token (clipped at the sequence level)
    # seq 1: s_1 = 1.1051709 inside the band: -(1.1051709 * -2) = 2.2103418 on each token
    # clip_frac = 1 of 2 sequences; ratio/mean = (2 + 1.1051709) / 2 = 1.5525855
    loss, metrics = gspo_loss(OLD + LOG_RATIO, OLD, ADV, MASK, CLIP, CLIP)
    expected = torch.tensor([[-1.5, -1.5, 0.0], [2.2103418, 2.2103418, 2.2103418]])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=0)
    assert abs(metrics["loss/clip_frac"] - 0.5) < 1e-6
    assert abs(metrics["loss/ratio_mean"] - 1.5525855) < 1e-5


def test_gspo_token_gradient_equals_sequence_level_gradient():
    # sequence-level objective: L = -mean_b min(s_b A_b, clip(s_b) A_b), s_b with its full gradient.
    # by hand: seq 0 clipped -> 0; seq 1: dL/dlp_t = -(1/2) * A_1 * s_1 * (1/3) = (1/3) * 1.1051709 = 0.3683903
    logprobs = (OLD + LOG_RATIO).requires_grad_(True)
    loss, _ = gspo_loss(logprobs, OLD, ADV, MASK, CLIP, CLIP)
    aggregate(loss, MASK, "seq_mean_token_mean").backward()
    token_grad = logprobs.grad.clone()

    logprobs.grad = None
    lengths = MASK.sum(dim=1)
    s = torch.exp(((logprobs - OLD) * MASK).sum(dim=1) / lengths)
    a = ADV[:, 0]
    seq_loss = -torch.minimum(s * a, s.clamp(1 - CLIP, 1 + CLIP) * a).mean()
    seq_loss.backward()

    torch.testing.assert_close(token_grad, logprobs.grad, atol=1e-6, rtol=0)
    g = 1.1051709 / 3
    torch.testing.assert_close(token_grad, torch.tensor([[0.0, 0.0, 0.0], [g, g, g]]), atol=1e-6, rtol=0)
