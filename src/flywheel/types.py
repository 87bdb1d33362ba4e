"""Contracts between stages: Task (dataset -> rollout), Completion (engine -> rollout), Episode (rollout -> buffer),
TrainBatch (-> trainer), StepResult (trainer ->)."""

from __future__ import annotations

import array
import itertools
import math
import traceback
from dataclasses import dataclass, field, fields
from typing import Any

import torch


@dataclass(frozen=True)
class Completion:
    """One sampled continuation, as the engine produced it."""

    token_ids: list[int]  # sampled tokens, end-of-sequence included when sampled
    logprobs: list[float]  # engine's log p(token) under the sampling weights, one per token
    text: str  # detokenized token_ids (special tokens skipped)
    weight_versions: tuple[int | None, ...]  # engine weight version that produced each token; None on environment tokens
    truncated: bool = False  # stopped by the length limit, not by end-of-sequence
    # multi-turn episodes: 1 on the model's tokens, 0 on environment tokens (whose logprobs are 0.0);
    # None: every token is the model's
    loss_mask: tuple[int, ...] | None = None

    @property
    def weight_version(self) -> int:
        """The oldest weight version among its model tokens (an in-flight update or several turns make
        them differ); -1 when it has none."""
        versions = self.weight_versions
        if None not in versions:  # one model turn: no environment tokens to skip (a scan in C)
            return min(versions, default=-1)
        return min((v for v in versions if v is not None), default=-1)


@dataclass(frozen=True)
class Task:
    """One problem: the prompt an episode starts from, its reference answer, and whatever grading needs."""

    prompt: str
    answer: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Episode:
    """A prompt, one completion of it, and its reward.

    ``error`` names why an episode cannot be scored (its environment raised or timed out, its reward
    is not finite): such an episode is left out of its group's advantages and of the loss, not
    scored 0.
    """

    prompt_ids: list[int]
    completion: Completion
    reward: float
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None and math.isfinite(self.reward)

    @property
    def fault(self) -> str | None:
        """Why the episode is invalid (its ``error``, or "nonfinite_reward"); None when valid."""
        return None if self.valid else self.error or "nonfinite_reward"


class RemoteCause(Exception):
    """What an episode's failure was raised by, in another process (a rollout worker): the exception's
    type name and its traceback as text, since exceptions and their tracebacks do not travel whole."""

    def __init__(self, type_name: str, text: str) -> None:
        super().__init__(type_name, text)
        self.type_name, self.text = type_name, text

    def __str__(self) -> str:
        return self.type_name


class RemoteFailure(Exception):
    """An episode's failure made in another process: its ``reason`` (``env_error``, ``reward_timeout``...),
    its one-line message and its cause (``RemoteCause``); it pickles whole."""

    def __init__(self, reason: str | None, detail: str, cause: RemoteCause | None) -> None:
        super().__init__(reason, detail, cause)
        self.reason, self.detail, self.__cause__ = reason, detail, cause

    def __str__(self) -> str:
        return self.detail

    @classmethod
    def of(cls, failure: BaseException) -> RemoteFailure:
        cause = failure.__cause__
        text = "".join(traceback.format_exception(cause)) if cause is not None else ""
        return cls(getattr(failure, "reason", None), str(failure), RemoteCause(type(cause).__name__, text) if cause is not None else None)


@dataclass(frozen=True)
class TrainBatch:
    """B episodes, right-padded to T tokens; every [B, T] tensor is indexed by token position.

    ``behaviour_logprobs[b, t]`` is the engine's log p(tokens[b, t] | tokens[b, :t]) where
    ``loss_mask[b, t]`` is 1 (completion tokens), and 0 elsewhere.
    """

    tokens: torch.Tensor  # [B, T] int64
    attention_mask: torch.Tensor  # [B, T] int64, 1 on real tokens
    loss_mask: torch.Tensor  # [B, T] float32, 1 on completion tokens that are trained on
    behaviour_logprobs: torch.Tensor  # [B, T] float32
    advantages: torch.Tensor  # [B, T] float32 (sequence estimators repeat one value along the row)
    returns: torch.Tensor | None = None  # [B, T] float32, critic targets (critic algorithms only)
    old_values: torch.Tensor | None = None  # [B, T] float32, the critic's values when the batch was built
    old_logprobs: torch.Tensor | None = None  # [B, T] float32, proximal logprobs (set by the trainer)
    weight_versions: torch.Tensor | None = None  # [B, T] int64, the engine weight version that sampled each token; -1 elsewhere
    teacher_logprobs: torch.Tensor | None = (
        None  # [B, T] float32, a teacher's logprobs of the tokens, aligned as behaviour_logprobs (distillation only)
    )

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def split(self, parts: int) -> list[TrainBatch]:
        """Consecutive slices of rows whose sizes differ by at most one; every field is sliced."""
        return [self.select(rows) for rows in torch.arange(len(self)).tensor_split(parts)]

    def select(self, rows: torch.Tensor | list[int]) -> TrainBatch:
        """The batch of the given rows, in that order; every field is indexed."""
        rows = torch.as_tensor(rows, dtype=torch.long)
        return self._map(lambda field: field[rows])

    def narrow(self, width: int) -> TrainBatch:
        """The first ``width`` token positions of every row (the right padding beyond them dropped)."""
        return self._map(lambda field: field[:, :width])

    def to(self, device: torch.device | str) -> TrainBatch:
        return self._map(lambda field: field.to(device))

    def _map(self, change) -> TrainBatch:
        """The batch with ``change`` applied to every field that is set."""
        return TrainBatch(**{f.name: None if getattr(self, f.name) is None else change(getattr(self, f.name)) for f in fields(self)})


@dataclass(frozen=True)
class StepResult:
    """What a training step returns across the trainer seam.

    ``metrics``: the step's metrics (``loss/``, ``train/``), combined over micro-batches and ranks, the
    same on every rank. ``spans``: (stage, start, end) of the forward, backward and optimizer passes,
    ``time.time()`` stamps of the trainer's clock (rank 0's for a group). ``logprobs``: when asked
    (rollout dumps), the policy's logprobs of the step's rows before its update, [rows, T] aligned with
    ``TrainBatch.tokens``: a group's for its whole batch, a rank's for its rows in the order it trained them.
    """

    metrics: dict[str, float]
    spans: list[tuple[str, float, float]] = field(default_factory=list)
    logprobs: torch.Tensor | None = None


def collate(episodes: list[Episode], pad_id: int) -> TrainBatch:
    """The right-padded TrainBatch of episodes, with zero advantages (set by the caller). Each column is
    gathered into one flat C array and scattered into its padded tensor in one step (row-major order is
    the episodes' order): a step's tokens are not converted one list at a time."""
    prompts = torch.tensor([len(e.prompt_ids) for e in episodes])
    ends = prompts + torch.tensor([len(e.completion.token_ids) for e in episodes])
    width = int(ends.max())
    column = torch.arange(width)
    real = column < ends[:, None]  # prompt and completion
    completion = real & (column >= prompts[:, None])
    tokens = torch.full((len(episodes), width), pad_id, dtype=torch.long)
    tokens[real] = _flat("q", (t for e in episodes for t in (e.prompt_ids, e.completion.token_ids)), torch.long)
    loss_mask, behaviour = torch.zeros((len(episodes), width)), torch.zeros((len(episodes), width))
    masks = (e.completion.loss_mask or itertools.repeat(1.0, len(e.completion.token_ids)) for e in episodes)
    loss_mask[completion] = _flat("d", masks, torch.float64).float()
    behaviour[completion] = _flat("d", (e.completion.logprobs for e in episodes), torch.float64).float()
    versions = torch.full((len(episodes), width), -1, dtype=torch.long)
    versioned = completion & torch.tensor([bool(e.completion.weight_versions) for e in episodes])[:, None]
    versions[versioned] = _flat("q", (_versions(e.completion.weight_versions) for e in episodes), torch.long)
    return TrainBatch(tokens, real.long(), loss_mask, behaviour, torch.zeros_like(loss_mask), weight_versions=versions)


def _flat(typecode: str, parts, dtype: torch.dtype) -> torch.Tensor:
    """The concatenation of ``parts`` (iterables of numbers) as a 1-d tensor, through a C array."""
    flat = array.array(typecode, itertools.chain.from_iterable(parts))
    return torch.frombuffer(flat, dtype=dtype) if flat else torch.empty(0, dtype=dtype)


def _versions(versions: tuple[int | None, ...]) -> tuple[int, ...]:
    """Weight versions with -1 for the environment's tokens (None)."""
    return versions if None not in versions else tuple(-1 if v is None else v for v in versions)
