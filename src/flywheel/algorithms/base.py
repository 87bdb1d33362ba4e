"""An algorithm as an object: its config, how it filters and shapes a group, its advantages and its loss.

The loop and the trainer call only these methods; neither branches on an algorithm's name. A new
algorithm is a file holding its config class (a ``name`` literal plus the fields it uses) and a subclass of
``Algorithm`` decorated with ``@register_algorithm``: in this package, or in a module of the user's own named
in ``algorithm.imports``. Fields shared by every algorithm (aggregation, entropy bonus, KL to a reference,
off-policy corrections) are declared here, once.

Shapes: a step has G groups of n episodes, B = G * n rows of T tokens (see ``TrainBatch``).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from flywheel.algorithms.aggregation import LossTotals, aggregate, token_mean
from flywheel.algorithms.kl import kl_penalty
from flywheel.algorithms.off_policy import masked_is_keep, truncated_is_weights
from flywheel.config.algorithms import AlgorithmConfig, add_algorithm_config


class Algorithm:
    """The default behaviour: every group is kept and unshaped, sequence-level advantages broadcast
    over each completion's loss tokens, no critic. Subclasses override what differs."""

    config_type: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    needs_critic: ClassVar[bool] = False
    needs_teacher: ClassVar[bool] = False  # its config names a ``teacher`` (a model directory or a server's URL) that scores tokens

    def __init__(self, config: AlgorithmConfig) -> None:
        self.config = config

    # --- the rollout side: group filtering and reward shaping ---------------------------------------
    @property
    def sampling_rounds(self) -> int:
        """How many prompts_per_step rounds of groups a step may examine before training on what it has."""
        return 1

    def keep_group(self, rewards: list[float]) -> bool:
        """Whether a finished group is trained on (dynamic sampling drops uninformative ones)."""
        return True

    def shape_rewards(self, rewards: torch.Tensor, lengths: torch.Tensor, max_tokens: int) -> torch.Tensor:
        """rewards, lengths (model tokens per episode) [n] -> shaped rewards [n]."""
        return rewards

    def train_mask(self, mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
        """loss_mask [B, T], truncated [B] bool -> the tokens trained on."""
        return mask

    # --- advantages ---------------------------------------------------------------------------------
    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """rewards [G, n] -> sequence advantages [G, n]; ``valid`` [G, n] bool (None: all) leaves
        episodes out of the statistics, with advantage 0."""
        raise NotImplementedError

    def token_advantages(
        self, rewards: torch.Tensor, valid: torch.Tensor | None, mask: torch.Tensor, values: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """rewards [G, n], valid [G, n] or None, mask [B, T] (0 on left-out episodes), critic values
        [B, T] (critic algorithms only) -> (advantages [B, T], critic returns [B, T] or None)."""
        return self.advantages(rewards, valid).flatten()[:, None] * mask, None

    def teacher_advantages(self, advantages: torch.Tensor, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Algorithms that ``needs_teacher``: token advantages [B, T], the student's sampling logprobs and the
        teacher's of the same tokens [B, T], mask [B, T] -> the advantages trained on [B, T]."""
        raise NotImplementedError

    # --- the loss -----------------------------------------------------------------------------------
    def policy_loss(
        self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """All [B, T] -> (per-token loss [B, T], metrics)."""
        raise NotImplementedError

    def behaviour_correction(self, log_ratio: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float]]:
        """log pi_proximal - log pi_behaviour [B, T] -> (loss mask [B, T], loss weights [B, T] or None,
        metrics): masked IS drops tokens, truncated IS weighs them (``algorithm.off_policy``)."""
        c = self.config
        if c.off_policy == "mis":
            kept, metrics = masked_is_keep(log_ratio, mask, c.is_level, c.is_low, c.is_high)
            return kept, None, metrics
        if c.off_policy == "tis":
            weights, metrics = truncated_is_weights(log_ratio, mask, c.is_level, c.is_cap)
            return mask, weights, metrics
        return mask, None, {}

    def loss(
        self,
        logprobs: torch.Tensor,
        entropy: torch.Tensor,
        reference_logprobs: torch.Tensor | None,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        weights: torch.Tensor | None,
        totals: LossTotals,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """A micro-batch's share of the step's scalar loss (all [B, T]; ``totals`` count the whole
        step): the policy loss (weighted by the off-policy weights), minus the entropy bonus, plus the
        KL to the reference when it is placed in the loss."""
        c = self.config
        per_token, metrics = self.policy_loss(logprobs, old_logprobs, advantages, mask)
        if weights is not None:
            per_token = per_token * weights
        loss = aggregate(per_token, mask, c.aggregation, totals)
        if c.entropy_coef > 0:
            loss = loss - c.entropy_coef * aggregate(entropy, mask, c.aggregation, totals)
        if reference_logprobs is not None:
            kl = kl_penalty(logprobs, reference_logprobs, c.kl_estimator)
            metrics["loss/kl_reference"] = token_mean(kl.detach(), mask).item()
            if c.kl_placement == "loss":
                loss = loss + c.kl_beta * aggregate(kl, mask, c.aggregation, totals)
        return loss, metrics

    @property
    def needs_reference(self) -> bool:
        return self.config.kl_beta > 0

    @property
    def loss_uses_reference(self) -> bool:
        """The loss takes the reference logprobs (the KL placed in the loss). Placed in the reward, the
        KL is charged when the batch is built, and the reference runs once per token, there."""
        return self.needs_reference and self.config.kl_placement == "loss"


#: Every registered algorithm by ``algorithm.name``.
ALGORITHMS: dict[str, type[Algorithm]] = {}


def register_algorithm(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: ``cls`` becomes selectable as ``algorithm.name`` (its ``config_type``'s name), its
    config class the schema of that ``algorithm:`` section. Registering a name twice is refused."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)) or cls.config_type is AlgorithmConfig:
        raise TypeError(f"@register_algorithm takes a subclass of Algorithm whose config_type is its own config class (got {cls!r})")
    name = add_algorithm_config(cls.config_type)
    known = ALGORITHMS.setdefault(name, cls)
    if known is not cls:
        raise ValueError(f"algorithm name {name!r} is taken by {known.__module__}.{known.__qualname__}; give {cls.__qualname__}'s config another")
    return cls
