"""PPO clipped surrogate (Schulman et al. 2017) over tokens."""

import torch

from flywheel.algorithms.aggregation import token_mean


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """All tensors [B, T] (advantages broadcast per token). Returns the token-mean loss and metrics.

    loss_t = -min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t), r_t = exp(logprobs_t - old_logprobs_t).
    ``clip_frac`` is the fraction of tokens whose clipped term is the smaller (gradient cut off).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = token_mean(-torch.minimum(unclipped, clipped), mask)
    with torch.no_grad():
        metrics = {
            "clip_frac": token_mean((clipped < unclipped).float(), mask).item(),
            "ratio/mean": token_mean(ratio, mask).item(),
        }
    return loss, metrics
