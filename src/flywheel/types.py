"""Contracts between stages: Completion (engine -> rollout), Episode (rollout -> buffer), TrainBatch (-> trainer)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Completion:
    """One sampled continuation, as the engine produced it."""

    token_ids: list[int]  # sampled tokens, end-of-sequence included when sampled
    logprobs: list[float]  # engine's log p(token) under the sampling weights, one per token
    text: str  # detokenized token_ids (special tokens skipped)
    weight_version: int  # engine weight version that produced every token of it


@dataclass(frozen=True)
class Episode:
    """A prompt, one completion of it, and its reward; episodes of one prompt share a group id."""

    group: int
    prompt_ids: list[int]
    completion: Completion
    reward: float


@dataclass(frozen=True)
class TrainBatch:
    """B episodes, right-padded to T tokens; every [B, T] tensor is indexed by token position.

    ``behaviour_logprobs[b, t]`` is the engine's log p(tokens[b, t] | tokens[b, :t]) where
    ``loss_mask[b, t]`` is 1 (completion tokens), and 0 elsewhere.
    """

    tokens: torch.Tensor  # [B, T] int64
    attention_mask: torch.Tensor  # [B, T] int64, 1 on real tokens
    loss_mask: torch.Tensor  # [B, T] float32, 1 on completion tokens
    behaviour_logprobs: torch.Tensor  # [B, T] float32
    advantages: torch.Tensor  # [B] float32, one per episode

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def split(self, parts: int) -> list["TrainBatch"]:
        """Consecutive equal slices (parts must divide B)."""
        size = len(self) // parts
        fields = (self.tokens, self.attention_mask, self.loss_mask, self.behaviour_logprobs, self.advantages)
        return [TrainBatch(*(f[i * size : (i + 1) * size] for f in fields)) for i in range(parts)]


def collate(episodes: list[Episode], advantages: torch.Tensor, pad_id: int) -> TrainBatch:
    """Builds the right-padded TrainBatch of episodes, with one advantage per episode."""
    rows = [e.prompt_ids + e.completion.token_ids for e in episodes]
    width = max(map(len, rows))
    tokens = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width))
    behaviour = torch.zeros((len(rows), width))
    for i, (e, row) in enumerate(zip(episodes, rows)):
        start, end = len(e.prompt_ids), len(row)
        tokens[i, :end] = torch.tensor(row)
        attention[i, :end] = 1
        loss_mask[i, start:end] = 1.0
        behaviour[i, start:end] = torch.tensor(e.completion.logprobs)
    return TrainBatch(tokens, attention, loss_mask, behaviour, advantages.float())
