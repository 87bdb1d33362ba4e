"""Format check: does a completion have the required shape (a reward function for a rubric)."""

from __future__ import annotations

import re
from functools import lru_cache

#: Reasoning between think tags, then exactly one answer between answer tags, nothing after.
THINK_ANSWER = r"\s*<think>(?:(?!</?think>).)*</think>\s*<answer>(?:(?!</?answer>).)*</answer>\s*"


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.DOTALL)


def format_reward(completion: str, pattern: str = THINK_ANSWER) -> float:
    """1.0 when the whole completion matches ``pattern`` (``.`` matches newlines too), else 0.0."""
    return 1.0 if _compiled(pattern).fullmatch(completion) else 0.0
