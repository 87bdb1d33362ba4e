"""How per-token loss values [B, T] become one scalar (the aggregation choices of GRPO, DAPO and Dr. GRPO)."""

import torch

AGGREGATIONS = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm")


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, norm_tokens: int | None = None) -> torch.Tensor:
    """values, mask [B, T] -> scalar. With len_b = sum_t mask_bt:

    - ``token_mean``: sum(values * mask) / max(sum(mask), 1); every token weighs the same (DAPO).
    - ``seq_mean_token_sum``: mean_b sum_t values * mask; each token weighs 1 / B.
    - ``seq_mean_token_mean``: mean_b (sum_t values * mask / max(len_b, 1)); each sequence weighs the same (GRPO).
    - ``seq_mean_token_sum_norm``: sum(values * mask) / (B * norm_tokens), a constant divisor such as the
      maximum generation length (Dr. GRPO, Liu et al. 2025); ``norm_tokens`` is required.
    """
    masked = values * mask
    if mode == "token_mean":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if mode == "seq_mean_token_sum":
        return masked.sum(dim=1).mean()
    if mode == "seq_mean_token_mean":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    if mode == "seq_mean_token_sum_norm":
        if norm_tokens is None:
            raise ValueError(
                "aggregation 'seq_mean_token_sum_norm' needs norm_tokens (e.g. the maximum generation length)"
            )
        return masked.sum() / (values.shape[0] * norm_tokens)
    raise ValueError(f"unknown aggregation {mode!r}; expected one of {', '.join(AGGREGATIONS)}")


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every masked-in token of the batch: each token weighs the same, long sequences weigh more."""
    return aggregate(values, mask, "token_mean")
