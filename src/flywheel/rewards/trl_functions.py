"""Reward functions written for TRL's GRPOTrainer, called as TRL calls them, as a scorer of the reward pipeline.

    fn(prompts=..., completions=..., completion_ids=..., trainer_state=None, **columns) -> list[float | None]

One call per group (a batch of completions and their tasks). The format follows the prompt, as in
TRL: a task whose prompt was a list of chat messages (conversational format) gives ``prompts`` as
those message lists and each completion as ``[{"role": "assistant", "content": text}]``; a text prompt
(standard format) gives strings, even when the model's chat template rendered it. ``completion_ids``
are the ids of the model's tokens. The dataset's columns but the prompt come as keyword arguments,
one list each (a dataset task's ``columns``; other environments' tasks give ``answer``). TRL's
``trainer_state`` is None here. A function may be ``async def``; a plain one runs in a worker thread.
None for a sample means "does not apply": it adds nothing to that reward (TRL's nansum); so does NaN, as in
TRL. A call that raises or outlives ``reward.function_timeout_s`` makes the group's episodes invalid
(``RewardFault``; a plain function's thread is abandoned, not stopped); a return that is not one float
or None per completion stops the run (``UserFunctionBug``), as infinities make their episodes invalid
(``nonfinite_reward``).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from flywheel.rewards.faults import RewardFault, UserFunctionBug, is_number, shown
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


async def call_trl_function(
    fn: Callable, name: str, completions: Sequence[str], tasks: Sequence[dict], timeout_s: float | None = None
) -> list[float | None]:
    """``fn``'s scores of the batch, each a float or None; ``RewardFault`` when it raises or outlives
    ``timeout_s``, ``UserFunctionBug`` when it returns anything but one float or None per completion."""
    kwargs = trl_arguments(completions, tasks)
    try:
        call = fn(**kwargs) if inspect.iscoroutinefunction(fn) else asyncio.to_thread(fn, **kwargs)
        values = await asyncio.wait_for(call, timeout_s)
    except TimeoutError as error:
        raise RewardFault("reward_timeout", f"reward function {name!r} did not return within {timeout_s:g} s (reward.function_timeout_s)") from error
    except Exception as error:
        raise RewardFault("reward_error", f"reward function {name!r} raised {type(error).__name__}: {error}") from error
    scores = _scores(values, len(completions))
    if scores is None:
        raise UserFunctionBug(
            f"reward function {name!r} must return a list of {len(completions)} floats or None, one per completion; it returned {shown(values)}"
        )
    return [None if v is None or math.isnan(v) else v for v in scores]


def _scores(values: Any, n: int) -> list[float | None] | None:
    """``values`` as n floats or None, or None when they are not that."""
    if not isinstance(values, (list, tuple)) or len(values) != n or not all(v is None or is_number(v) for v in values):
        return None
    try:
        return [None if v is None else float(v) for v in values]
    except (TypeError, ValueError):  # a tensor of several values
        return None


def trl_scorer(fn: Callable, name: str, weight: float = 1.0, timeout_s: float | None = None) -> Scorer:
    """A pipeline scorer calling ``fn`` the TRL way, each call limited to ``timeout_s`` seconds; its sub-score
    is logged as reward/<name>/mean."""

    async def score(completions: Sequence[str], tasks: Sequence[dict]) -> tuple[list[float | None], dict[str, float]]:
        return await call_trl_function(fn, name, completions, tasks, timeout_s), {}

    return Scorer(name, score, weight)
