r"""reasoning-gym scoring: strict by default (one answer, equal to the reference), the datasets' lenient score on request."""

import pytest

from flywheel.envs.reasoning_gym_scoring import (
    as_number,
    holds_reference_and_more,
    normalise,
    strict_score,
)
from flywheel.envs.registry import make_env


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("  Arnold. ", "arnold"),
        ("1 2 3\n4 5 6", "123456"),
        (r"$\dfrac{79}{173}$", "79/173"),
        (r"\frac{-1}{2}", "-1/2"),
        ("Victoria is a knight, and Jacob is a knave.", "victoriaisaknight,andjacobisaknave"),
    ],
)
def test_normalise(text, normal):
    assert normalise(text) == normal


def test_numbers_are_compared_by_value():
    assert [as_number(t) for t in ["1,234.50", "-7", ".5", "1,2,3", "12,34", "1e5", "7/2"]] == [1234.5, -7, 0.5, None, None, None, None]
    assert [strict_score(a, "28080") for a in ["28080", "28,080", "28080.0", "$28080", "28081", "028080"]] == [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]


def test_a_reference_among_candidates_is_detected():
    assert holds_reference_and_more("x**2 or 0", "x**2") and holds_reference_and_more("0 X**2", "x**2")
    assert not holds_reference_and_more(" X**2. ", "x**2") and not holds_reference_and_more("x**3", "x**2")


def episode(dataset, answer, **kwargs):
    """The reward of ``<answer>{answer}</answer>`` on the dataset's first task (seed 0)."""
    env = make_env("reasoning_gym", dataset=dataset, **kwargs)
    env.reset(env.tasks(1, seed=0)[0])
    return env.step(f"Let me think. <answer>{answer}</answer>").reward


# (dataset, config, answer, lenient reward): each a list of candidates the datasets pay; strict pays none
HEDGES = [
    ("basic_arithmetic", {}, "106475279601 or 106475279600", 12 / 28),  # the reference is 106475279601
    ("leg_counting", {"min_animals": 1, "max_animals": 2}, " ".join(map(str, range(20, 41))), 2 / 62),  # 30
    ("letter_counting", {}, "0123456789", 0.1),  # 1
    ("letter_counting", {}, "1 or 2", 1 / 6),
    ("gsm_symbolic", {}, "28080 or 0", 1.0),  # this dataset's own check pays the list in full
    ("fraction_simplification", {}, r"$\dfrac{79}{173}$ or $\dfrac{1}{2}$", 1.0),
    ("game_of_life_halting", {}, "False", 1.0),  # its check is bool(answer): any text pays
]


@pytest.mark.parametrize(("dataset", "config", "answer", "lenient"), HEDGES)
def test_candidate_lists_score_zero_by_default_and_their_lenient_score_on_request(dataset, config, answer, lenient):
    assert episode(dataset, answer, **config) == 0.0
    assert episode(dataset, answer, scoring="lenient", **config) == pytest.approx(lenient, abs=1e-12)


@pytest.mark.parametrize("dataset", ["knights_knaves", "quantum_lock", "sokoban"])
def test_a_verified_dataset_does_not_pay_the_reference_with_more(dataset):
    # these verifiers ignore what they cannot parse: the reference followed by ' or 0' passes them in full
    strict, lenient = (make_env("reasoning_gym", dataset=dataset, scoring=s) for s in ("strict", "lenient"))
    task = strict.tasks(1, seed=0)[0]
    for env in (strict, lenient):
        env.reset(task)
    hedge = f"<answer>{task.answer} or 0</answer>"
    assert (strict.step(hedge).reward, lenient.step(hedge).reward) == (0.0, 1.0)
    assert strict.step(f"<answer>{task.answer}</answer>").reward == 1.0


# honest answers in another form than the reference's, all paid in full by strict scoring
HONEST = [
    ("basic_arithmetic", "106,475,279,601"),
    ("basic_arithmetic", "106475279601.0"),
    ("zebra_puzzles", "Arnold"),  # reference 'arnold'
    ("fraction_simplification", "79/173"),  # reference '$\dfrac{79}{173}$'
    ("fraction_simplification", r"\frac{79}{173}"),
    ("gsm_symbolic", "$28080"),
    ("countdown", "(98-54)*6-(34+66)"),  # another expression reaching the target (reference 6*(98 - 54) - 34 - 66)
    ("knights_knaves", "Jacob is a knave, and Victoria is a knight"),  # statements reordered
    ("complex_arithmetic", "48 + 36i"),  # reference '48.0 + 36.0i'
    ("game_of_life_halting", "true"),
]


@pytest.mark.parametrize(("dataset", "answer"), HONEST)
def test_honest_answers_in_other_forms_score_one(dataset, answer):
    assert episode(dataset, answer) == 1.0


def test_without_tags_the_whole_reply_is_the_answer():
    env = make_env("reasoning_gym", dataset="zebra_puzzles")
    env.reset(env.tasks(1, seed=0)[0])
    assert (env.step("arnold").reward, env.step("It is arnold.").reward) == (1.0, 0.0)


def test_an_unknown_scoring_is_one_sentence():
    with pytest.raises(ValueError, match=r"^reasoning_gym scoring must be 'strict' or 'lenient', not 'partial'$"):
        make_env("reasoning_gym", dataset="basic_arithmetic", scoring="partial")


def test_a_composite_item_is_scored_by_its_own_dataset_rule():
    from reasoning_gym.composite import DatasetSpec

    env = make_env("reasoning_gym", dataset="composite", datasets=[DatasetSpec("countdown", 1, {}), DatasetSpec("leg_counting", 1, {})])
    tasks = env.tasks(2, seed=0)
    assert [(t.metadata["entry"]["metadata"]["source_dataset"], t.answer) for t in tasks] == [
        ("leg_counting", "146"),
        ("countdown", "42*(30 - 4 - 23)"),
    ]
    env.reset(tasks[1])  # countdown: another expression reaching the target is paid, a list is not
    assert [env.step(f"<answer>{a}</answer>").reward for a in ["(30 - 4 - 23)*42", "42*(30 - 4 - 23) or 0"]] == [1.0, 0.0]
