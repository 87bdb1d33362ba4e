"""The step's scored groups -> a TrainBatch: collated tokens, the algorithm's advantages (and critic
returns and rollout-time values), the loss mask without left-out episodes."""

from __future__ import annotations

from dataclasses import replace

import torch

from flywheel.algorithms.base import Algorithm
from flywheel.algorithms.distill import Score, prefill_logprobs
from flywheel.types import Episode, TrainBatch, collate


async def build_batch(groups: list[list[Episode]], algorithm: Algorithm, pad_id: int, trainer, teacher: Score | None = None) -> TrainBatch:
    """Collates the groups (equal-sized) and fills in advantages. ``trainer`` (a TrainerGroup) is
    asked for the reference KL (``kl_placement: reward``) and the critic's values (critic algorithms),
    ``teacher`` (an engine's ``score``) for the teacher's logprobs (algorithms that ``needs_teacher``);
    invalid episodes (see ``Episode.valid``) get loss mask 0 and are left out of the advantages."""
    c = algorithm.config
    episodes = [e for group in groups for e in group]
    batch = collate(episodes, pad_id)
    valid = torch.tensor([[e.valid for e in group] for group in groups])
    rewards = torch.tensor([[e.reward if e.valid else 0.0 for e in group] for group in groups])
    mask = batch.loss_mask * valid.flatten()[:, None]
    if c.kl_beta > 0 and c.kl_placement == "reward":  # over the valid episodes' loss tokens
        rewards = rewards - c.kl_beta * (await trainer.sequence_kl(replace(batch, loss_mask=mask))).view_as(rewards)
    values = await trainer.values(batch) if algorithm.needs_critic else None
    advantages, returns = algorithm.token_advantages(rewards, None if valid.all() else valid, mask, values)
    teacher_logprobs = None
    if algorithm.needs_teacher:
        if teacher is None:
            raise ValueError(f"algorithm {c.name!r} needs a teacher's logprobs; build its batch with the run's teacher engine")
        teacher_logprobs = await prefill_logprobs(teacher, batch)
        advantages = algorithm.teacher_advantages(advantages, batch.behaviour_logprobs, teacher_logprobs, mask)
    mask = algorithm.train_mask(mask, torch.tensor([e.completion.truncated for e in episodes]))
    return replace(batch, loss_mask=mask, advantages=advantages, returns=returns, old_values=values, teacher_logprobs=teacher_logprobs)
