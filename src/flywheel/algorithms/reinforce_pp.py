"""REINFORCE++ advantages (Hu 2025): normalisation over the whole batch instead of within each group."""

from typing import Literal

import torch
from pydantic import Field

from flywheel.algorithms.base import Algorithm, ClipConfig
from flywheel.algorithms.grpo import masked_group_centre
from flywheel.algorithms.ppo_clip import ClippedSurrogate


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


class ReinforcePPConfig(ClipConfig):
    name: Literal["reinforce_pp"] = "reinforce_pp"
    kl_beta: float = Field(0.001, ge=0, description="KL-to-reference weight; 0 loads no reference model.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k1", description="Per-token KL estimator.")
    kl_placement: Literal["loss", "reward"] = Field("reward", description="Add the KL to the loss, or subtract its sequence sum from the reward.")


class ReinforcePP(ClippedSurrogate, Algorithm):
    """REINFORCE++: batch-whitened returns (the KL to the reference subtracted from the reward)."""

    config_type = ReinforcePPConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return reinforce_pp_advantages(rewards, valid=valid)


class ReinforcePPBaselineConfig(ClipConfig):
    name: Literal["reinforce_pp_baseline"] = "reinforce_pp_baseline"


class ReinforcePPBaseline(ReinforcePP):
    """REINFORCE++-baseline: group-mean baseline, then batch whitening."""

    config_type = ReinforcePPBaselineConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return reinforce_pp_baseline_advantages(rewards, valid=valid)
