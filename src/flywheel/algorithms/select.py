"""Maps an AlgorithmConfig to its pure functions: the only place that knows the algorithm names."""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from flywheel.algorithms.cispo import cispo_loss
from flywheel.algorithms.grpo import grpo_advantages
from flywheel.algorithms.gspo import gspo_loss
from flywheel.algorithms.ppo_clip import ppo_clip_loss
from flywheel.algorithms.reinforce_pp import reinforce_pp_advantages, reinforce_pp_baseline_advantages
from flywheel.algorithms.rloo import rloo_advantages
from flywheel.config import AlgorithmConfig

#: (logprobs, old_logprobs, advantages, mask) -> (per-token loss [B, T], metrics)
PolicyLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, float]]]


def policy_loss(a: AlgorithmConfig) -> PolicyLoss:
    if a.loss == "gspo":
        return partial(gspo_loss, clip_low=a.clip_low, clip_high=a.clip_high)
    if a.loss == "cispo":
        return partial(cispo_loss, clip_low=a.clip_low, clip_high=a.clip_high)
    return partial(ppo_clip_loss, clip_low=a.clip_low, clip_high=a.clip_high, dual_clip=a.dual_clip)


def sequence_advantages(a: AlgorithmConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """rewards [groups, group_size] -> advantages of the same shape (every estimator but GAE)."""
    return {
        "grpo": partial(grpo_advantages, std_scale=a.std_scale),
        "rloo": rloo_advantages,
        "reinforce_pp": reinforce_pp_advantages,
        "reinforce_pp_baseline": reinforce_pp_baseline_advantages,
    }[a.advantage]
