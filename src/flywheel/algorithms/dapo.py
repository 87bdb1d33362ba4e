"""DAPO helpers (Yu et al. 2025): the soft overlong penalty and the groups kept by dynamic sampling."""

import torch


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
