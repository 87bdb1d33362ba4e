"""Per-token estimators of KL(pi || ref) on tokens sampled from pi (Schulman 2020, "Approximating KL divergence")."""

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """logprobs, ref_logprobs [B, T] -> per-token estimate [B, T]. With x = logprobs - ref_logprobs:

    k1 = x (unbiased, high variance, can be negative); k2 = x^2 / 2 (biased, low variance);
    k3 = exp(-x) - 1 + x (unbiased, never negative).
    """
    x = logprobs - ref_logprobs
    if estimator == "k1":
        return x
    if estimator == "k2":
        return 0.5 * x**2
    if estimator == "k3":
        return torch.exp(-x) - 1.0 + x
    raise ValueError(f"unknown KL estimator {estimator!r}; expected one of {', '.join(KL_ESTIMATORS)}")
