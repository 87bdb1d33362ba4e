"""OPO's optimal reward baseline (Hao et al. 2025), written outside flywheel: each completion's reward minus
its group's mean reward weighted by completion length, trained with the PPO clipped surrogate.

    PYTHONPATH=$PWD/examples flywheel train configs/quickstart.yaml algorithm.imports=[opo] algorithm.name=opo
"""

from typing import Literal

import torch
from pydantic import Field

from flywheel.algorithms import Algorithm, register_algorithm
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.config.algorithms import ClipConfig


class OPOConfig(ClipConfig):
    """The clipped surrogate's settings (clip_low, clip_high, dual_clip) and every algorithm's, plus one."""

    name: Literal["opo"] = "opo"
    length_power: float = Field(1.0, ge=0, description="Baseline weights are lengths to this power: 1 is OPO's, 0 the group mean.")


def opo_advantages(rewards: torch.Tensor, lengths: torch.Tensor, valid: torch.Tensor, power: float) -> torch.Tensor:
    """rewards, lengths, valid [groups, n] -> advantages [groups, n]: r_i - sum_j w_j r_j / sum_j w_j with
    w_j = lengths_j ** power over the group's valid episodes; 0 for the others."""
    weights = lengths.to(rewards.dtype).pow(power) * valid
    baseline = (weights * rewards).sum(dim=1, keepdim=True) / weights.sum(dim=1, keepdim=True).clamp(min=1e-8)
    return (rewards - baseline) * valid


@register_algorithm
class OPO(ClippedSurrogate, Algorithm):
    """Length-weighted group baselines, broadcast over each completion's tokens; the clipped surrogate loss."""

    config_type = OPOConfig

    def token_advantages(self, rewards, valid, mask, values):
        """rewards [G, n], valid [G, n] or None, mask [B, T] (B = G * n) -> (advantages [B, T], no critic returns)."""
        valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid
        lengths = mask.sum(dim=1).view_as(rewards)
        advantages = opo_advantages(rewards, lengths, valid, self.config.length_power)
        return advantages.flatten()[:, None] * mask, None
