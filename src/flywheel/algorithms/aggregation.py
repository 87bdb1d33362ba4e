"""How per-token loss values [B, T] become one scalar (the aggregation choices of GRPO, DAPO and Dr. GRPO).

Every mode divides by counts of the whole optimiser step (``LossTotals``), never by those of the
slice at hand: a step cut into micro-batches (or ranks) sums to the loss of the uncut step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flywheel.config.algorithms import AGGREGATIONS


@dataclass(frozen=True)
class LossTotals:
    """Counts over one optimiser step: every micro-batch of every rank."""

    tokens: float  # loss tokens (sum of the loss mask)
    sequences: int  # rows
    norm_tokens: int | None = None  # seq_mean_token_sum_norm's constant (e.g. the generation limit)

    @classmethod
    def of(cls, mask: torch.Tensor, norm_tokens: int | None = None) -> LossTotals:
        """The totals of a step made of ``mask`` [B, T] alone."""
        return cls(mask.sum().item(), mask.shape[0], norm_tokens)

    def __add__(self, other: LossTotals) -> LossTotals:
        return LossTotals(self.tokens + other.tokens, self.sequences + other.sequences, self.norm_tokens)


def aggregate(
    values: torch.Tensor, mask: torch.Tensor, mode: str, totals: LossTotals | None = None, *, norm_tokens: int | None = None
) -> torch.Tensor:
    """values, mask [B, T] -> this slice's share of the step's scalar. ``totals`` count the step
    (default: this slice is the whole step, with ``norm_tokens``). With len_b = sum_t mask_bt,
    N = totals.tokens (at least 1) and S = totals.sequences:

    - ``token_mean``: sum(values * mask) / N; every token weighs the same (DAPO).
    - ``seq_mean_token_sum``: sum_b sum_t values * mask / S; each token weighs 1 / S.
    - ``seq_mean_token_mean``: sum_b (sum_t values * mask / max(len_b, 1)) / S; each sequence weighs the same (GRPO).
    - ``seq_mean_token_sum_norm``: sum(values * mask) / (S * norm_tokens), a constant divisor such as the
      maximum generation length (Dr. GRPO, Liu et al. 2025); ``norm_tokens`` is required.
    """
    totals = totals or LossTotals.of(mask, norm_tokens)
    masked = values * mask
    if mode == "token_mean":
        return masked.sum() / torch.tensor(totals.tokens, dtype=masked.dtype).clamp(min=1.0)
    if mode == "seq_mean_token_sum":
        return masked.sum(dim=1).sum() / totals.sequences
    if mode == "seq_mean_token_mean":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).sum() / totals.sequences
    if mode == "seq_mean_token_sum_norm":
        if totals.norm_tokens is None:
            raise ValueError("aggregation 'seq_mean_token_sum_norm' needs norm_tokens (e.g. the maximum generation length)")
        return masked.sum() / (totals.sequences * totals.norm_tokens)
    raise ValueError(f"unknown aggregation {mode!r}; expected one of {', '.join(AGGREGATIONS)}")


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every masked-in token of the batch: each token weighs the same, long sequences weigh more."""
    return aggregate(values, mask, "token_mean")
