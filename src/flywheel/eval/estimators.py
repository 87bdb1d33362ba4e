"""Sample-based eval estimators over tasks, each with n samples: pass@k (unbiased), maj@k, mean@k, and
bootstrap confidence intervals over tasks. Pure functions; no I/O."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n, of which c are correct, is
    correct) = 1 - C(n - c, k) / C(n, k); the unbiased estimator of pass@k from n >= k samples."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")
    return 1.0 - comb(n - c, k) / comb(n, k)


def majority_correct(answers: Sequence[str], correct: Sequence[bool]) -> float:
    """Whether the most frequent answer is correct (1.0 or 0.0); ties go to the answer seen first.
    Samples with the same answer may disagree on correctness (a grader that reads more than the
    answer): the majority answer then scores the share of its samples that were correct."""
    if not answers:
        return 0.0
    counts = Counter(answers)
    top = max(counts.values())
    winner = next(a for a in answers if counts[a] == top)
    votes = [ok for a, ok in zip(answers, correct, strict=True) if a == winner]
    return sum(votes) / len(votes)


def bootstrap_ci(per_task: Sequence[float], resamples: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over tasks: tasks resampled with replacement."""
    if not per_task:
        return (float("nan"), float("nan"))
    rng, n = random.Random(seed), len(per_task)
    means = sorted(sum(per_task[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    return means[int(tail * (resamples - 1))], means[int(round((1.0 - tail) * (resamples - 1)))]


def summarise(per_task: Sequence[float], resamples: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """{"value": mean over tasks, "ci_low", "ci_high"}."""
    low, high = bootstrap_ci(per_task, resamples, level, seed)
    return {"value": sum(per_task) / max(len(per_task), 1), "ci_low": low, "ci_high": high}


def task_scores(rewards: Sequence[float], answers: Sequence[str], k: int, is_correct: Callable[[float], bool]) -> dict[str, float]:
    """pass@k, maj@k and mean@k of one task from its n >= k samples (rewards and extracted answers).
    maj@k and mean@k use the first k samples."""
    correct = [is_correct(r) for r in rewards]
    first = slice(0, k)
    return {
        f"pass@{k}": pass_at_k(len(rewards), sum(correct), k),
        f"maj@{k}": majority_correct(answers[first], correct[first]),
        f"mean@{k}": sum(rewards[first]) / k,
    }
