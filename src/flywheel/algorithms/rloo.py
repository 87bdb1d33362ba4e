"""RLOO advantages (Ahmadian et al. 2024, "Back to Basics"): a leave-one-out baseline within each group."""

import torch

from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.config.algorithms import RLOOConfig


def rloo_advantages(rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape, n >= 2.

    A_i = r_i - (1 / (n - 1)) * sum_{j != i} r_j = r_i - (sum_j r_j - r_i) / (n - 1):
    each sample's baseline is the mean of the other n - 1 samples of its group. ``valid``
    [groups, n] bool leaves episodes out: n and the sums count a group's valid samples only, and
    left-out ones get 0.
    """
    if valid is not None:
        v = valid.to(rewards.dtype)
        count = v.sum(dim=1, keepdim=True)
        others_mean = ((rewards * v).sum(dim=1, keepdim=True) - rewards) / (count - 1).clamp(min=1.0)
        return (rewards - others_mean) * v
    n = rewards.shape[1]
    if n < 2:
        raise ValueError(f"RLOO needs at least 2 samples per group, got {n}")
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (n - 1)
    return rewards - others_mean


@register_algorithm
class RLOO(ClippedSurrogate, Algorithm):
    """Leave-one-out baselines and the PPO clipped surrogate."""

    config_type = RLOOConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return rloo_advantages(rewards, valid)
