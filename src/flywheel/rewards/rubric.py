"""Rubric: a weighted sum of named reward functions, with the named sub-scores kept for logging."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

RewardFn = Callable[[str, dict], float]


@dataclass(frozen=True)
class RubricScore:
    """The weighted total and each function's unweighted score under `reward/<name>`."""

    total: float
    scores: dict[str, float]


class Rubric:
    """`total = sum(weight[name] * fn(completion, task))`; weights default to 1.0."""

    def __init__(self, functions: Mapping[str, RewardFn], weights: Mapping[str, float] | None = None):
        weights = dict(weights or {})
        if not functions:
            raise ValueError("a rubric needs at least one reward function")
        if unknown := sorted(set(weights) - set(functions)):
            raise ValueError(f"weights for unknown reward functions: {unknown}")
        if bad := sorted(n for n, w in weights.items() if not math.isfinite(w)):
            raise ValueError(f"weights must be finite: {bad}")
        self.functions = dict(functions)
        self.weights = {name: float(weights.get(name, 1.0)) for name in functions}

    def score(self, completion: str, task: dict) -> RubricScore:
        """Score one completion; a function returning a non-finite value is an error."""
        scores = {}
        for name, fn in self.functions.items():
            value = float(fn(completion, task))
            if not math.isfinite(value):
                raise ValueError(f"reward function {name!r} returned {value}")
            scores[f"reward/{name}"] = value
        total = sum(self.weights[name] * scores[f"reward/{name}"] for name in self.functions)
        return RubricScore(total, scores)

    def __call__(self, completion: str, task: dict) -> float:
        """The total, so that a rubric is itself a reward function."""
        return self.score(completion, task).total
