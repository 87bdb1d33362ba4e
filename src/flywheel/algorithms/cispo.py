"""CISPO (MiniMax-M1, 2025): clip the importance-sampling weight, not the update, so every token keeps a gradient."""

import torch

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.grpo import grpo_advantages
from flywheel.config.algorithms import CISPOConfig


def cispo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float | None,
    clip_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """All tensors [B, T]. Returns the per-token loss [B, T] (zero outside the mask, not aggregated) and metrics.

    r_t = exp(logprobs_t - old_logprobs_t);  w_t = sg[clip(r_t, 1 - clip_low, 1 + clip_high)] (no lower bound
    when ``clip_low`` is None);  loss_t = -w_t * A_t * logprobs_t.
    ``clip_frac`` is the fraction of tokens whose weight was clipped.
    """
    ratio = torch.exp(logprobs - old_logprobs).detach()
    low = None if clip_low is None else 1.0 - clip_low
    weight = ratio.clamp(low, 1.0 + clip_high)
    loss = -weight * advantages * logprobs
    with torch.no_grad():
        metrics = {
            "loss/clip_frac": token_mean((weight != ratio).float(), mask).item(),
            "loss/ratio_mean": token_mean(ratio, mask).item(),
        }
    return loss * mask, metrics


@register_algorithm
class CISPO(Algorithm):
    """Group-normalised advantages and clipped, stop-gradient IS weights on every token."""

    config_type = CISPOConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return grpo_advantages(rewards, self.config.std_scale, valid=valid)

    def policy_loss(self, logprobs, old_logprobs, advantages, mask):
        return cispo_loss(logprobs, old_logprobs, advantages, mask, self.config.clip_low, self.config.clip_high)
