"""RLOO advantages (Ahmadian et al. 2024, "Back to Basics"): a leave-one-out baseline within each group."""

import torch


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape, n >= 2.

    A_i = r_i - (1 / (n - 1)) * sum_{j != i} r_j = r_i - (sum_j r_j - r_i) / (n - 1):
    each sample's baseline is the mean of the other n - 1 samples of its group.
    """
    n = rewards.shape[1]
    if n < 2:
        raise ValueError(f"RLOO needs at least 2 samples per group, got {n}")
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (n - 1)
    return rewards - others_mean
