"""pass@k, maj@k, mean@k and the bootstrap interval: exact values."""

import itertools
import random

import pytest

from flywheel.eval.estimators import bootstrap_ci, majority_correct, pass_at_k, summarise, task_scores


def brute_pass_at_k(correct: list[bool], k: int) -> float:
    """The definition: the share of k-subsets holding at least one correct sample."""
    subsets = list(itertools.combinations(correct, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_pass_at_k_hand_values():
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)  # pass@1 is the share correct
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # C(3,2)/C(4,2) = 3/6 subsets miss it
    assert pass_at_k(5, 2, 5) == 1.0  # every sample drawn


@pytest.mark.parametrize("n,k", [(5, 1), (5, 3), (6, 2), (7, 7)])
def test_pass_at_k_equals_its_definition(n, k):
    rng = random.Random(n * 10 + k)
    for _ in range(20):
        correct = [rng.random() < 0.4 for _ in range(n)]
        assert pass_at_k(n, sum(correct), k) == pytest.approx(brute_pass_at_k(correct, k))


@pytest.mark.parametrize("n,c,k", [(3, 1, 4), (3, 4, 2), (3, 1, 0)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(n, c, k)


def test_majority_vote():
    assert majority_correct(["7", "8", "7"], [True, False, True]) == 1.0
    assert majority_correct(["7", "8", "8"], [True, False, False]) == 0.0
    assert majority_correct(["8", "7"], [False, True]) == 0.0  # a tie goes to the answer seen first
    assert majority_correct(["7", "7", "9"], [True, False, False]) == 0.5  # the grader split one answer
    assert majority_correct([], []) == 0.0


def test_task_scores_use_the_first_k_for_maj_and_mean_and_all_n_for_pass():
    rewards, answers = [0.0, 0.0, 1.0, 1.0], ["1", "2", "3", "3"]
    scores = task_scores(rewards, answers, 2, lambda r: r >= 1.0)
    assert scores == {"pass@2": pytest.approx(1 - 1 / 6), "maj@2": 0.0, "mean@2": 0.0}


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible():
    values = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_ci(values, resamples=2000, seed=3)
    assert low < 0.3 < high
    assert 0.19 < low < 0.26 and 0.34 < high < 0.41  # normal approximation: 0.3 +- 1.96 * 0.0458 = [0.210, 0.390]
    assert bootstrap_ci(values, resamples=2000, seed=3) == (low, high)
    assert bootstrap_ci([0.5] * 10) == (0.5, 0.5)  # no spread, no width
    assert summarise(values, resamples=200)["value"] == pytest.approx(0.3)
