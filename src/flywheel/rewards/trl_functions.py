"""Reward functions written for TRL's GRPOTrainer, called as TRL calls them, as a scorer of the reward pipeline.

    fn(prompts=..., completions=..., completion_ids=..., trainer_state=None, **columns) -> list[float | None]

One call per group (a batch of completions and their tasks). The format follows the prompt, as in
TRL: a task whose prompt was a list of chat messages (conversational format) gives ``prompts`` as
those message lists and each completion as ``[{"role": "assistant", "content": text}]``; a text prompt
(standard format) gives strings, even when the model's chat template rendered it. ``completion_ids``
are the ids of the model's tokens. The dataset's columns but the prompt come as keyword arguments,
one list each (a dataset task's ``columns``; other environments' tasks give ``answer``). TRL's
``trainer_state`` is None here. A function may be ``async def``; a plain one runs in a worker thread.
None for a sample means "does not apply": it adds nothing to that reward (TRL's nansum).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from flywheel.rewards.pipeline import Scorer

_RESERVED = ("prompts", "completions", "completion_ids", "trainer_state")


def trl_arguments(completions: Sequence[str], tasks: Sequence[dict]) -> dict[str, Any]:
    """The keyword arguments TRL would pass for these completions of these tasks."""
    conversational = bool(tasks) and all("messages" in t for t in tasks)
    columns = [t.get("columns", {"answer": t.get("answer")}) for t in tasks]
    names = [k for k in dict.fromkeys(k for c in columns for k in c) if k not in _RESERVED]
    return {
        "prompts": [t["messages"] if conversational else t["prompt"] for t in tasks],
        "completions": [[{"role": "assistant", "content": c}] for c in completions] if conversational else list(completions),
        "completion_ids": [list(t.get("completion_ids", [])) for t in tasks],
        "trainer_state": None,
        **{name: [c.get(name) for c in columns] for name in names},
    }


async def call_trl_function(fn: Callable, name: str, completions: Sequence[str], tasks: Sequence[dict]) -> list[float | None]:
    """``fn``'s scores of the batch, each a float or None; ValueError when it returns something else."""
    kwargs = trl_arguments(completions, tasks)
    values = await fn(**kwargs) if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn, **kwargs)
    if not isinstance(values, (list, tuple)) or len(values) != len(completions):
        got = f"{len(values)} values" if isinstance(values, (list, tuple)) else type(values).__name__
        raise ValueError(f"reward function {name!r} must return a list of {len(completions)} floats or None, one per completion (got {got})")
    scores = [None if v is None else float(v) for v in values]
    return [None if v is None or math.isnan(v) else v for v in scores]


def trl_scorer(fn: Callable, name: str, weight: float = 1.0) -> Scorer:
    """A pipeline scorer calling ``fn`` the TRL way; its sub-score is logged as reward/<name>/mean."""

    async def score(completions: Sequence[str], tasks: Sequence[dict]) -> tuple[list[float | None], dict[str, float]]:
        return await call_trl_function(fn, name, completions, tasks), {}

    return Scorer(name, score, weight)
