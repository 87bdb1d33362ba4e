import pytest

from flywheel.rewards.verifiers import MathVerifier, last_number


def test_last_number():
    assert last_number("so 12 apples, total 1,234.5") == 1234.5
    assert last_number("no digits") is None


@pytest.fixture(scope="module")
def verifier():
    with MathVerifier(timeout_s=30.0) as v:
        yield v


@pytest.mark.parametrize(
    "completion, answer, expected",
    [
        ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("so $x = \\sqrt{4}$, i.e. \\boxed{2}", "2", 1.0),
        ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", 1.0),
        ("\\boxed{3}", "2", 0.0),
        ("I do not know", "2", 0.0),
    ],
)
def test_math_verify_equivalence(verifier, completion, answer, expected):
    assert verifier(completion, answer) == expected


def test_a_check_past_its_deadline_scores_zero_and_the_verifier_recovers():
    with MathVerifier(timeout_s=0.001) as v:
        # a 1 ms deadline cannot cover parsing in a fresh worker: the check times out
        assert v("\\boxed{\\frac{1}{2}}", "0.5") == 0.0
        assert v.timeouts == 1
        v.timeout_s = 30.0
        assert v("\\boxed{\\frac{1}{2}}", "0.5") == 1.0
