"""REINFORCE++ advantages (Hu 2025): normalisation over the whole batch instead of within each group."""

import torch


def reinforce_pp_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape.

    A = (r - mean(r)) / (std(r) + eps), mean and sample (Bessel-corrected) std over all groups * n rewards.
    """
    return (rewards - rewards.mean()) / (rewards.std() + eps)


def reinforce_pp_baseline_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape (REINFORCE++ with a group baseline).

    c = r - mean_group(r); A = c / (std(c) + eps), the sample std over all groups * n centred values.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    return centred / (centred.std() + eps)
