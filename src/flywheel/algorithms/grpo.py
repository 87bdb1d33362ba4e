"""GRPO advantages (Shao et al. 2024, DeepSeekMath): rewards normalised within each prompt's group."""

import torch

from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.config.algorithms import STD_SCALES, GRPOConfig


def grpo_advantages(rewards: torch.Tensor, std_scale: str = "group", eps: float = 1e-6, valid: torch.Tensor | None = None) -> torch.Tensor:
    """rewards [groups, group_size] -> advantages of the same shape.

    Each reward minus its group's mean, then divided according to ``std_scale``:

    - ``group``: by the group's sample standard deviation (Bessel-corrected) plus ``eps`` (GRPO);
    - ``batch``: by the sample standard deviation of all rewards of the batch plus ``eps``;
    - ``none``: not divided, centred only (Dr. GRPO, Liu et al. 2025).

    A group of equal rewards gets zeros in every mode. ``valid`` [groups, group_size] bool leaves
    episodes out (their advantage is 0): means and stds are over the valid rewards only.
    """
    if valid is not None:
        return _masked_grpo(rewards, std_scale, eps, valid)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if std_scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + eps)
    if std_scale == "batch":
        return centred / (rewards.std() + eps)
    if std_scale == "none":
        return centred
    raise ValueError(f"unknown std_scale {std_scale!r}; expected one of {', '.join(STD_SCALES)}")


def masked_group_centre(rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Each valid reward minus the mean of its group's valid rewards; 0 where not valid."""
    v = valid.to(rewards.dtype)
    mean = (rewards * v).sum(dim=1, keepdim=True) / v.sum(dim=1, keepdim=True).clamp(min=1.0)
    return (rewards - mean) * v


def _masked_grpo(rewards: torch.Tensor, std_scale: str, eps: float, valid: torch.Tensor) -> torch.Tensor:
    centred = masked_group_centre(rewards, valid)
    if std_scale == "group":
        count = valid.sum(dim=1, keepdim=True).to(rewards.dtype)
        std = ((centred**2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1.0)).sqrt()
        return centred / (std + eps)
    if std_scale == "batch":
        return centred / (rewards[valid].std() + eps)
    if std_scale == "none":
        return centred
    raise ValueError(f"unknown std_scale {std_scale!r}; expected one of {', '.join(STD_SCALES)}")


@register_algorithm
class GRPO(ClippedSurrogate, Algorithm):
    """Group-normalised sequence advantages and the PPO clipped surrogate."""

    config_type = GRPOConfig

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return grpo_advantages(rewards, self.config.std_scale, valid=valid)
