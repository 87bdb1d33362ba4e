"""PPO with a learned critic (Schulman et al. 2017): GAE advantages, whitened over the batch, the clipped
surrogate, and a clipped value loss against the values the critic gave at rollout time."""

from typing import Literal

import torch
from pydantic import Field

from flywheel.algorithms.base import Algorithm, ClipConfig
from flywheel.algorithms.gae import gae_advantages, masked_whiten, terminal_rewards
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.algorithms.value_loss import clipped_value_loss


class PPOConfig(ClipConfig):
    name: Literal["ppo"] = "ppo"
    gamma: float = Field(1.0, ge=0, le=1, description="GAE discount.")
    lam: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    critic_lr: float = Field(1e-3, gt=0, description="Critic AdamW learning rate.")
    value_clip: float = Field(0.2, gt=0, description="New values stay within this of the rollout-time values in the value loss.")


class PPO(ClippedSurrogate, Algorithm):
    config_type = PPOConfig
    needs_critic = True

    def token_advantages(self, rewards, valid, mask, values):  # left-out episodes have mask 0: no GAE terms
        advantages, returns = gae_advantages(terminal_rewards(rewards.flatten(), mask), values, mask, self.config.gamma, self.config.lam)
        return masked_whiten(advantages, mask), returns

    def value_loss(
        self, values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """All [B, T]; ``old_values`` are the critic's values when the batch was built (rollout time)."""
        return clipped_value_loss(values, old_values, returns, mask, self.config.value_clip)
