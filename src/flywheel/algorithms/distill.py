"""On-policy distillation (Agarwal et al. 2024, GKD; Thinking Machines 2025): the student samples, a teacher
scores the student's own tokens, and each token's advantage is minus the sampled reverse KL,
log p_teacher - log p_student, optionally plus the task reward's group-normalised advantage. The loss is
the clipped surrogate; the teacher is an engine of its own (``algorithm.teacher``), asked for a prefill."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import torch

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.base import Algorithm, register_algorithm
from flywheel.algorithms.grpo import grpo_advantages
from flywheel.algorithms.ppo_clip import ClippedSurrogate
from flywheel.config.algorithms import DistillConfig
from flywheel.types import TrainBatch

#: An engine's scoring call: token sequences -> per sequence, log p(token t | tokens before it) for t >= 1.
Score = Callable[[list[list[int]]], Awaitable[list[list[float]]]]


async def prefill_logprobs(score: Score, batch: TrainBatch) -> torch.Tensor:
    """The logprobs ``score`` gives each row's tokens (right-padded), [B, T] aligned as ``behaviour_logprobs``:
    position t holds log p(token t | tokens before it); position 0 and padding hold 0. Rows of equal tokens (a
    group's samples often repeat) are scored once."""
    lengths = batch.attention_mask.sum(dim=1).tolist()
    rows = [tuple(row[:length].tolist()) for row, length in zip(batch.tokens, lengths)]
    unique = list(dict.fromkeys(rows))
    scored = dict(zip(unique, await score([list(row) for row in unique])))
    out = torch.zeros(batch.tokens.shape)
    for i, row in enumerate(rows):
        out[i, 1 : len(row)] = torch.tensor(scored[row])
    return out


def reverse_kl_advantages(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor, clip: float | None = None) -> torch.Tensor:
    """The student's (sampling) and the teacher's logprobs of the sampled tokens, mask, all [B, T] -> per-token
    advantages log p_teacher - log p_student [B, T]: minus the one-sample estimate of the reverse KL, clipped to
    [-clip, clip] when ``clip`` is given."""
    gap = teacher - student
    return (gap if clip is None else gap.clamp(-clip, clip)) * mask


def teacher_metrics(batch: TrainBatch) -> dict[str, float]:
    """``distill/reverse_kl``: the token mean of log p_student - log p_teacher over the trained tokens."""
    if batch.teacher_logprobs is None:
        return {}
    return {"distill/reverse_kl": token_mean(batch.behaviour_logprobs - batch.teacher_logprobs, batch.loss_mask).item()}


@register_algorithm
class Distill(ClippedSurrogate, Algorithm):
    """Per-token advantages from the teacher, plus ``reward_weight`` times GRPO's; the clipped surrogate loss."""

    config_type = DistillConfig
    needs_teacher = True

    def advantages(self, rewards: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        return self.config.reward_weight * grpo_advantages(rewards, self.config.std_scale, valid=valid)

    def teacher_advantages(self, advantages: torch.Tensor, student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        c = self.config
        return advantages + c.teacher_coef * reverse_kl_advantages(student, teacher, mask, c.advantage_clip)
