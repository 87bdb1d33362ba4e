"""DAPO helpers (Yu et al. 2025): the soft overlong penalty and the groups kept by dynamic sampling."""

import torch

from flywheel.algorithms.base import register_algorithm
from flywheel.algorithms.grpo import GRPO
from flywheel.config.algorithms import DAPOConfig


def overlong_penalty(lengths: torch.Tensor, max_tokens: int, buffer: int, factor: float = 1.0) -> torch.Tensor:
    """lengths [B] (completion token counts) -> reward penalty [B]. With L_c = max_tokens - buffer:

    0 when L <= L_c;  (L_c - L) / buffer * factor when L_c < L <= max_tokens;  -factor when L > max_tokens.
    """
    if not 0 < buffer <= max_tokens:
        raise ValueError(f"buffer must be in [1, max_tokens={max_tokens}], got {buffer}")
    lengths = lengths.to(torch.float32) if not lengths.is_floating_point() else lengths
    threshold = max_tokens - buffer
    ramp = (threshold - lengths) / buffer * factor
    penalty = torch.where(lengths > threshold, ramp, torch.zeros_like(lengths))
    return torch.where(lengths > max_tokens, torch.full_like(lengths, -factor), penalty)


def informative_groups(rewards: torch.Tensor) -> torch.Tensor:
    """rewards [G, n] -> bool [G]: True where the group's rewards are not all equal (a non-zero learning signal)."""
    return (rewards != rewards[:, :1]).any(dim=1)


@register_algorithm
class DAPO(GRPO):
    """GRPO with clip-higher, token-mean aggregation, dynamic sampling and overlong shaping/filtering."""

    config_type = DAPOConfig

    @property
    def sampling_rounds(self) -> int:
        return self.config.max_sampling_rounds if self.config.dynamic_sampling else 1

    def keep_group(self, rewards: list[float]) -> bool:
        return not self.config.dynamic_sampling or bool(informative_groups(torch.tensor([rewards]))[0])

    def shape_rewards(self, rewards: torch.Tensor, lengths: torch.Tensor, max_tokens: int) -> torch.Tensor:
        c = self.config
        return rewards + overlong_penalty(lengths, max_tokens, c.overlong_buffer, c.overlong_penalty) if c.overlong_buffer else rewards

    def train_mask(self, mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        return mask * ~truncated[:, None] if self.config.overlong_filter else mask
