"""How per-token loss values become one scalar."""

import torch


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every masked-in token of the batch: each token weighs the same, long sequences weigh more."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)
