"""Hidden-test rewards through the real sandbox (bubblewrap jail, pre-forked pool)."""

import pytest

from flywheel.rewards.code import hidden_tests_reward
from flywheel.rewards.guards import ExitTricks
from flywheel.sandbox import Sandbox

CASES = [((2, 3), 5), ((-1, 1), 0), ((10, 5), 15), ((0, 0), 0)]


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, cpu_seconds=2, wall_timeout_s=5.0) as sb:
        yield sb


def test_correct_code_in_a_fence_scores_one(sandbox):
    completion = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    reward, report = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 1.0 and report.passed == 4


def test_partial_code_scores_its_pass_rate(sandbox):
    # a + b when a > 0, else a * b: (2, 3) -> 5 pass; (-1, 1) -> -1 fail; (10, 5) -> 15 pass; (0, 0) -> 0 pass
    completion = "def add(a, b):\n    return a + b if a > 0 else a * b\n"
    reward, _ = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 0.75


def test_exiting_with_code_zero_earns_nothing_and_is_flagged(sandbox):
    completion = "```python\nimport sys\nsys.exit(0)\ndef add(a, b):\n    return a + b\n```"
    reward, report = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 0.0 and report.passed == 0
    assert ExitTricks().check(completion).flagged


def test_prose_without_code_scores_zero(sandbox):
    assert hidden_tests_reward(sandbox, "I would add the two numbers.", "add", CASES) == (0.0, None)
