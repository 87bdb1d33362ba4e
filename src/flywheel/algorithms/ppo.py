"""PPO with a learned critic (Schulman et al. 2017): GAE advantages, whitened over the batch, the clipped
surrogate, and a clipped value loss against the values the critic gave at rollout time."""

import torch

from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.gae import gae_advantages, masked_whiten, terminal_rewards
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.algorithms.value_loss import clipped_value_loss
from flywheel.config.algorithms import PPOConfig


@register_algorithm
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
