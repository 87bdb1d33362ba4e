"""Answers that a reasoning-gym verifier would eval on this host: code never runs, honest expressions still score."""

import pytest

from flywheel.envs.reasoning_gym_eval_guard import may_evaluate
from flywheel.envs.registry import make_env


@pytest.mark.parametrize(
    ("dataset", "answer", "allowed"),
    [
        ("countdown", "6*(98 - 54) - 34 - 66", True),
        ("intermediate_integration", "-exp(x)*sin(x) + exp(x)*cos(x) + C", True),
        ("simple_integration", "-5*X**9 - 2*X**6/3 + 4.5*X**3 + C", True),
        ("countdown", "__import__('os').getpid() or 1", False),
        ("countdown", "eval(chr(49))", False),  # a name outside the math functions
        ("countdown", "x.subs(x, 1)", False),  # attribute access
        ("countdown", "ｅｖａｌ(1)", False),  # full-width letters: Python reads them as `eval`
        ("n_queens", "_ Q _ _\n_ _ _ Q\nQ _ _ _\n_ _ Q _", True),
        ("n_queens", "[['Q', '_'], ['_', 'Q']]", True),
        ("n_queens", "__import__('os')", False),
        ("spiral_matrix", "[(y := 1)]", False),
        ("basic_arithmetic", "__import__('os')", True),  # never evaluated: compared as text
    ],
)
def test_may_evaluate(dataset, answer, allowed):
    assert may_evaluate(dataset, answer) is allowed


@pytest.mark.parametrize("dataset", ["countdown", "n_queens", "simple_integration"])
@pytest.mark.parametrize("scoring", ["strict", "lenient"])
def test_code_in_an_answer_never_runs_on_the_host(tmp_path, dataset, scoring):
    marker = tmp_path / "ran"
    env = make_env("reasoning_gym", dataset=dataset, scoring=scoring)
    env.reset(env.tasks(1, seed=0)[0])
    reward = env.step(f"<answer>__import__('pathlib').Path({str(marker)!r}).touch() or 1</answer>").reward
    assert (reward, marker.exists()) == (0.0, False)


@pytest.mark.parametrize(
    ("dataset", "answer"),
    [
        ("intermediate_integration", "exp(x)*(cos(x) - sin(x)) + C"),  # reference -exp(x)*sin(x) + exp(x)*cos(x) + C
        ("simple_integration", "4*X**3 - 2*X**6/3 - 5*X**9 + C"),
        ("n_queens", None),  # the reference grid
    ],
)
def test_honest_expressions_still_reach_the_verifier(dataset, answer):
    env = make_env("reasoning_gym", dataset=dataset)
    task = env.tasks(1, seed=0)[0]
    env.reset(task)
    assert env.step(f"<answer>{answer or task.answer}</answer>").reward == 1.0
