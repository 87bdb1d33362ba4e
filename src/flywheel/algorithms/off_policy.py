"""Corrections for tokens sampled by a behaviour policy (the engine) other than the trainer's proximal
policy: truncated importance sampling (TIS) and masked importance sampling (MIS, as in IcePop).

``log_ratio`` is log pi_proximal - log pi_behaviour per token, [B, T]: in synchronous training it is
the engine/trainer numerical mismatch; with stale rollouts it also holds the policy lag. Weighting
the PPO loss of the proximal policy by these weights is decoupled PPO (Hilton et al. 2022).
"""

from __future__ import annotations

import torch

from flywheel.algorithms.aggregation import token_mean


def _ratios(log_ratio: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """Per-token ratios, or each sequence's product of ratios repeated along its row ('sequence')."""
    if level == "token":
        return torch.exp(log_ratio)
    if level == "sequence":
        return torch.exp((log_ratio * mask).sum(dim=1, keepdim=True)).expand_as(log_ratio)
    raise ValueError(f"unknown importance-sampling level {level!r}; expected 'token' or 'sequence'")


@torch.no_grad()
def truncated_is_weights(log_ratio: torch.Tensor, mask: torch.Tensor, level: str, cap: float) -> tuple[torch.Tensor, dict[str, float]]:
    """TIS: weights min(ratio, cap) per token (level 'token') or per sequence ('sequence'), [B, T]."""
    ratio = _ratios(log_ratio, mask, level)
    weights = ratio.clamp(max=cap)
    return weights * mask, _metrics(ratio, mask, ratio > cap)


@torch.no_grad()
def masked_is_keep(log_ratio: torch.Tensor, mask: torch.Tensor, level: str, low: float, high: float) -> tuple[torch.Tensor, dict[str, float]]:
    """MIS: a mask [B, T] that drops tokens (or whole sequences) whose ratio lies outside [low, high]."""
    ratio = _ratios(log_ratio, mask, level)
    outside = (ratio < low) | (ratio > high)
    return mask * ~outside, _metrics(ratio, mask, outside)


def _metrics(ratio: torch.Tensor, mask: torch.Tensor, corrected: torch.Tensor) -> dict[str, float]:
    present = mask > 0
    return {
        "train/is_ratio_mean": token_mean(ratio, mask).item(),
        "train/is_ratio_max": ratio[present].max().item() if present.any() else 0.0,
        "train/is_ratio_clip_frac": token_mean(corrected.float(), mask).item(),
    }
