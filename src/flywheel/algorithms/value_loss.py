"""Clipped value loss of the PPO critic (Schulman et al. 2017; the clipping as in OpenAI baselines)."""

import torch

from flywheel.algorithms.aggregation import token_mean


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """All [B, T]. 0.5 * token-mean of max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2)."""
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    loss = 0.5 * token_mean(per_token, mask)
    with torch.no_grad():
        metrics = {
            "loss/value_clip_frac": token_mean(((clipped - returns) ** 2 > (values - returns) ** 2).float(), mask).item(),
            "train/value_mean": token_mean(values, mask).item(),
        }
    return loss, metrics
