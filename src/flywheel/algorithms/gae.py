"""Generalised advantage estimation (Schulman et al. 2016, "High-Dimensional Continuous Control Using GAE")."""

import torch


@torch.no_grad()
def gae_advantages(
    token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """token_rewards, values, mask [B, T] -> (advantages, returns), both [B, T] and zero outside the mask.

    Over each row's completion tokens (contiguous, value 0 after the last one):
    delta_t = r_t + gamma * V_{t+1} - V_t,  A_t = delta_t + gamma * lam * A_{t+1},  returns_t = A_t + V_t.
    """
    rewards, values, mask = token_rewards.detach(), values.detach(), mask.detach().to(values.dtype)
    advantages = torch.zeros_like(values)
    next_value = torch.zeros_like(values[:, 0])
    next_advantage = torch.zeros_like(values[:, 0])
    for t in range(values.shape[1] - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        advantages[:, t] = advantage
        next_value = values[:, t] * mask[:, t]
        next_advantage = advantage
    return advantages, (advantages + values) * mask


@torch.no_grad()
def masked_whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(values - mean) / (std + eps) over the masked-in entries (population std), zero outside the mask."""
    count = mask.sum().clamp(min=1.0)
    mean = (values * mask).sum() / count
    std = ((((values - mean) * mask) ** 2).sum() / count).sqrt()
    return (values - mean) / (std + eps) * mask


def terminal_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """rewards [B] -> [B, T] token rewards: each row's reward on its last masked-in token, zero elsewhere."""
    last = mask.shape[1] - 1 - mask.flip(1).argmax(1)
    return torch.zeros_like(mask, dtype=rewards.dtype).index_put_((torch.arange(mask.shape[0]), last), rewards)
