"""PPO clipped surrogate (Schulman et al. 2017) over tokens, with asymmetric bounds ("clip-higher", DAPO,
Yu et al. 2025) and the optional dual clip for negative advantages (Ye et al. 2020)."""

import torch

from flywheel.algorithms.aggregation import token_mean


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """All tensors [B, T] (advantages broadcast per token). Returns the per-token loss [B, T] (zero outside
    the mask, not aggregated) and metrics.

    r_t = exp(logprobs_t - old_logprobs_t);  loss_t = -min(r_t * A_t, clip(r_t, 1 - clip_low, 1 + clip_high) * A_t).
    With ``dual_clip`` c > 1, tokens with A_t < 0 are capped: loss_t = min(loss_t, -c * A_t).
    ``clip_frac``: fraction of tokens whose clipped term is the smaller; ``dual_clip_frac``: fraction where the
    cap is active (gradient cut off in both cases).
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be greater than 1, got {dual_clip}")
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * advantages
    loss = -torch.minimum(unclipped, clipped)
    dual_active = torch.zeros_like(loss, dtype=torch.bool)
    if dual_clip is not None:
        cap = -dual_clip * advantages
        dual_active = (advantages < 0) & (loss > cap)
        loss = torch.where(dual_active, cap, loss)
    with torch.no_grad():
        metrics = {
            "loss/clip_frac": token_mean((clipped < unclipped).float(), mask).item(),
            "loss/dual_clip_frac": token_mean(dual_active.float(), mask).item(),
            "loss/ratio_mean": token_mean(ratio, mask).item(),
        }
    return loss * mask, metrics


class ClippedSurrogate:
    """The policy loss of the algorithms that use this surrogate (their config has clip_low,
    clip_high and dual_clip): mixed in before ``Algorithm``."""

    def policy_loss(
        self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        c = self.config
        return ppo_clip_loss(logprobs, old_logprobs, advantages, mask, c.clip_low, c.clip_high, c.dual_clip)
