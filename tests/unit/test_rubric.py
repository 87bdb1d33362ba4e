import math

import pytest

from flywheel.rewards.rubric import Rubric, RubricScore


def correct(completion: str, task: dict) -> float:
    return 1.0 if completion.strip() == task["answer"] else 0.0


def short(completion: str, task: dict) -> float:
    return 0.5 if len(completion) <= 4 else 0.0


def test_total_is_the_weighted_sum_and_sub_scores_are_unweighted():
    rubric = Rubric({"correct": correct, "short": short}, weights={"correct": 2.0, "short": -0.5})
    expected = RubricScore(2.0 * 1.0 - 0.5 * 0.5, {"reward/correct": 1.0, "reward/short": 0.5})
    assert rubric.score("42", {"answer": "42"}) == expected
    assert rubric.score("forty-two", {"answer": "42"}) == RubricScore(0.0, {"reward/correct": 0.0, "reward/short": 0.0})
    assert rubric("42", {"answer": "42"}) == 1.75


def test_weights_default_to_one_and_order_follows_the_functions():
    score = Rubric({"short": short, "correct": correct}).score("42", {"answer": "42"})
    assert score.total == 1.5
    assert list(score.scores) == ["reward/short", "reward/correct"]


def test_a_rubric_is_a_reward_function_of_another_rubric():
    inner = Rubric({"correct": correct}, weights={"correct": 3.0})
    outer = Rubric({"inner": inner, "short": short}, weights={"inner": 0.5})
    assert outer.score("42", {"answer": "42"}) == RubricScore(2.0, {"reward/inner": 3.0, "reward/short": 0.5})


@pytest.mark.parametrize(
    ("functions", "weights", "message"),
    [
        ({}, None, "at least one"),
        ({"correct": correct}, {"typo": 1.0}, "unknown"),
        ({"correct": correct}, {"correct": math.inf}, "finite"),
    ],
)
def test_invalid_rubrics_are_rejected(functions, weights, message):
    with pytest.raises(ValueError, match=message):
        Rubric(functions, weights)


def test_a_non_finite_sub_score_is_an_error():
    rubric = Rubric({"nan": lambda completion, task: math.nan})
    with pytest.raises(ValueError, match="'nan' returned nan"):
        rubric.score("x", {})
