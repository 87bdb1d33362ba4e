"""GRPO advantages (Shao et al. 2024, DeepSeekMath): rewards normalised within each prompt's group."""

import torch


def grpo_advantages(rewards: torch.Tensor, scale_by_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """rewards [groups, group_size] -> advantages of the same shape.

    Each reward minus its group's mean, divided (when ``scale_by_std``) by the group's sample
    standard deviation (Bessel-corrected) plus ``eps``. A group of equal rewards gets zeros.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale_by_std:
        return centred
    return centred / (rewards.std(dim=1, keepdim=True) + eps)
