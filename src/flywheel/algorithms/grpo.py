"""GRPO advantages (Shao et al. 2024, DeepSeekMath): rewards normalised within each prompt's group."""

import torch

STD_SCALES = ("group", "batch", "none")


def grpo_advantages(rewards: torch.Tensor, std_scale: str = "group", eps: float = 1e-6) -> torch.Tensor:
    """rewards [groups, group_size] -> advantages of the same shape.

    Each reward minus its group's mean, then divided according to ``std_scale``:

    - ``group``: by the group's sample standard deviation (Bessel-corrected) plus ``eps`` (GRPO);
    - ``batch``: by the sample standard deviation of all rewards of the batch plus ``eps``;
    - ``none``: not divided, centred only (Dr. GRPO, Liu et al. 2025).

    A group of equal rewards gets zeros in every mode.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if std_scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + eps)
    if std_scale == "batch":
        return centred / (rewards.std() + eps)
    if std_scale == "none":
        return centred
    raise ValueError(f"unknown std_scale {std_scale!r}; expected one of {', '.join(STD_SCALES)}")
