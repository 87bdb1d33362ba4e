"""Faults of the code that scores episodes: a reward function (reward.functions), a dataset grader
(task.grader), a guard, the judge's verdict parser.

Two kinds, handled apart:

- ``RewardFault``: a call raised or outlived its time limit. The episodes it scored are invalid
  (``reward_error``, ``reward_timeout``): left out of the advantages, counted (``reward/errors``,
  ``reward/timeouts``), the first traceback of each kind in errors/; the run goes on, as for an
  environment that raises.
- ``UserFunctionBug``: a function returned the wrong shape or type (a string, too few values). That
  is a bug in the code, not a bad episode: the run stops at the first such call with one sentence
  naming the function and what it returned (exit code 2).
"""

from __future__ import annotations

from typing import Any, Literal

RewardFaultKind = Literal["reward_error", "reward_timeout"]


class RewardFault(Exception):
    """A scoring call that raised (``reward_error``) or outlived its time limit (``reward_timeout``);
    ``__cause__`` holds what it raised."""

    def __init__(self, reason: RewardFaultKind, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class UserFunctionBug(ValueError):
    """A user function returned something of the wrong shape or type; the message names it and what it returned."""


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number ``float()`` takes as one (int, float, bool, numpy and 0-d tensor
    scalars), not text."""
    return not isinstance(value, (str, bytes)) and hasattr(type(value), "__float__")
