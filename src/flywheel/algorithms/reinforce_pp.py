"""REINFORCE++ advantages (Hu 2025): normalisation over the whole batch instead of within each group."""

import torch

from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.grpo import masked_group_centre
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.config.algorithms import ReinforcePPBaselineConfig, ReinforcePPConfig


def reinforce_pp_advantages(rewards: torch.Tensor, eps: float = 1e-6, valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape.

    A = (r - mean(r)) / (std(r) + eps), mean and sample (Bessel-corrected) std over all groups * n
    rewards; with ``valid`` [groups, n] bool, over the valid rewards only (the others get 0).
    """
    if valid is not None:
        kept = rewards[valid]
        return (rewards - kept.mean()) / (kept.std() + eps) * valid.to(rewards.dtype)
    return (rewards - rewards.mean()) / (rewards.std() + eps)


def reinforce_pp_baseline_advantages(rewards: torch.Tensor, eps: float = 1e-6, valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [groups, n] -> advantages of the same shape (REINFORCE++ with a group baseline).

    c = r - mean_group(r); A = c / (std(c) + eps), the sample std over all groups * n centred values;
    with ``valid`` [groups, n] bool, means and std over the valid entries only (the others get 0).
    """
    if valid is not None:
        centred = masked_group_centre(rewards, valid)
        return centred / (centred[valid].std() + eps)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    return centred / (centred.std() + eps)


@register_algorithm
class ReinforcePP(ClippedSurrogate, Algorithm):
    """REINFORCE++: batch-whitened returns (the KL to the reference subtracted from the reward)."""

    config_type = ReinforcePPConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return reinforce_pp_advantages(rewards, valid=valid)


@register_algorithm
class ReinforcePPBaseline(ReinforcePP):
    """REINFORCE++-baseline: group-mean baseline, then batch whitening."""

    config_type = ReinforcePPBaselineConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return reinforce_pp_baseline_advantages(rewards, valid=valid)
