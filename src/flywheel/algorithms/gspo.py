"""GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"): a clipped surrogate on the sequence-level,
length-normalised importance ratio, in its token form."""

import torch

from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.grpo import grpo_advantages
from flywheel.config.algorithms import GSPOConfig


def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """All tensors [B, T]; advantages constant along each row. Returns the per-token loss [B, T] (zero outside
    the mask, not aggregated) and metrics.

    s_b = exp(sum_t mask_bt * (logprobs_bt - old_logprobs_bt) / len_b);
    s_bt = sg[s_b] * exp(logprobs_bt - sg[logprobs_bt]), whose value is s_b;
    loss_bt = -min(s_bt * A_bt, clip(s_bt, 1 - clip_low, 1 + clip_high) * A_bt).
    Averaged over each sequence's tokens, the gradient equals that of the sequence-level objective.
    ``clip_frac`` is the fraction of sequences clipped, ``ratio/mean`` the mean of s_b.
    """
    lengths = mask.sum(dim=1)
    log_seq_ratio = ((logprobs - old_logprobs) * mask).sum(dim=1) / lengths.clamp(min=1.0)
    seq_ratio = torch.exp(log_seq_ratio)
    token_ratio = seq_ratio.detach()[:, None] * torch.exp(logprobs - logprobs.detach())
    unclipped = token_ratio * advantages
    clipped = token_ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * advantages
    loss = -torch.minimum(unclipped, clipped)
    with torch.no_grad():
        present = lengths > 0
        n_seq = present.sum().clamp(min=1).item()
        seq_adv = (advantages * mask).sum(dim=1) / lengths.clamp(min=1.0)
        seq_clipped = (seq_ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * seq_adv < seq_ratio * seq_adv) & present
        metrics = {
            "loss/clip_frac": seq_clipped.sum().item() / n_seq,
            "loss/ratio_mean": (seq_ratio * present).sum().item() / n_seq,
        }
    return loss * mask, metrics


@register_algorithm
class GSPO(Algorithm):
    """Group-normalised advantages and the sequence-level clipped ratio."""

    config_type = GSPOConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return grpo_advantages(rewards, self.config.std_scale, valid=valid)

    def policy_loss(self, logprobs, old_logprobs, advantages, mask):
        return gspo_loss(logprobs, old_logprobs, advantages, mask, self.config.clip_low, self.config.clip_high)
