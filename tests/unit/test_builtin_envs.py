"""The built-in environments, each through make_env with its real grader (sandbox, math-verify, reasoning-gym)."""

import re

import pytest

from flywheel.envs.base import StepResult, Task
from flywheel.envs.calculator import evaluate
from flywheel.envs.registry import make_env
from flywheel.sandbox import Sandbox


def test_arithmetic_is_one_turn_exact_answer():
    env = make_env("arithmetic")
    task = env.tasks(5, seed=0)[0]
    assert task == Task("864+394=", "1258")
    assert env.reset(task) == "864+394=" and env.max_turns == 1
    assert env.step(" 1258") == StepResult(None, 1.0, True, {})
    assert env.step("1259").reward == 0.0


@pytest.mark.parametrize(
    ("expression", "value"),
    [("347*582", 201954), ("(2+3)*4 - 10/4", 17.5), ("-2**3", -8), ("7//2 + 7%2", 4), ("1.5e3", 1500.0)],
)
def test_calculator_evaluates_arithmetic(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "only numbers and + - * / // % ** are allowed, not \"__import__('os')\""),
        ("x + 1", "only numbers and + - * / // % ** are allowed, not 'x'"),
        ("9**9**9", "exponents above 100 are not allowed"),
        (
            "10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99 * 10**99",
            "results over 1000 digits are not allowed",
        ),
        ("2 +", "'2 +' is not an arithmetic expression"),
        ("1/0", "division by zero"),
    ],
)
def test_calculator_refuses_what_is_not_plain_arithmetic(expression, message):
    with pytest.raises((ValueError, ZeroDivisionError), match=f"^{re.escape(message)}$"):
        evaluate(expression)


def test_calculator_episode_calls_the_tool_then_answers():
    env = make_env("calculator")
    task = env.tasks(3, seed=7)[0]
    a, b = map(int, task.prompt.removeprefix("What is ").removesuffix("?").split("*"))
    assert 100 <= a <= 999 and 100 <= b <= 999 and task.answer == str(a * b) and env.tasks(3, seed=7)[0] == task
    env.reset(task)
    call = f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{a}*{b}"}}}}</tool_call>'
    assert env.step(call) == StepResult([task.answer], None, False, {"tool_calls": 1, "tool_errors": 0}, role="tool")
    bad = '<tool_call>{"name": "calculate", "arguments": {"expression": "a*b"}}</tool_call><tool_call>{"name": "calc"}</tool_call>'
    assert env.step(bad) == StepResult(
        [
            "Error: calculate failed: ValueError: only numbers and + - * / // % ** are allowed, not 'a'.",
            "Error: unknown tool 'calc' (available: calculate).",
        ],
        None,
        False,
        {"tool_calls": 2, "tool_errors": 2},
        role="tool",
    )
    assert env.step(task.answer) == StepResult(None, 1.0, True, {"tool_calls": 0, "tool_errors": 0})
    assert env.step(str(a * b + 1)).reward == 0.0
    assert env.stop == ("</tool_call>",) and [t.name for t in env.tools] == ["calculate"]


def test_math_env_grades_by_equivalence():
    env = make_env("math")
    tasks = env.tasks(20, seed=1)
    task = next(t for t in tasks if "/" in t.answer)
    assert env.tasks(20, seed=1) == tasks
    num, den = task.answer.split("/")
    env.reset(task)
    assert env.step(f"So the result is \\boxed{{{task.answer}}}.").reward == 1.0
    assert env.step(f"$\\boxed{{\\frac{{{num}}}{{{den}}}}}$").reward == 1.0
    assert env.step(f"\\boxed{{{int(num) + 1}/{den}}}").reward == 0.0
    assert make_env("math").tasks(1, seed=0) == [Task("Compute 7/7 - 1/5. Put the simplified answer in \\boxed{}.", "4/5")]


SUM = Task("Compute 3/4 + 5/6. Put the simplified answer in \\boxed{}.", "19/12")
DIFFERENCE = Task("Compute 1/4 - 3/4. Put the simplified answer in \\boxed{}.", "-1/2")
WHOLE = Task("Compute 1/2 + 1/2. Put the simplified answer in \\boxed{}.", "1")


@pytest.mark.parametrize(
    ("task", "completion"),
    [
        (SUM, r"\boxed{\frac{3}{4}+\frac{5}{6}}"),  # the question restated: equal, not an answer
        (SUM, r"\boxed{3/4 + 5/6}"),
        (SUM, r"\boxed{\frac{38}{24}}"),
        (SUM, r"\boxed{1\frac{7}{12}}"),
        (SUM, r"\boxed{\frac{19}{12} \approx 1.58}"),
        (SUM, r"\boxed{1.58}"),  # rounded too far
        (WHOLE, r"\boxed{\frac{2}{2}}"),
        (WHOLE, r"\boxed{\frac{1}{1}}"),
    ],
)
def test_math_env_refuses_answers_that_still_need_work(task, completion):
    env = make_env("math")
    env.reset(task)
    assert env.step(completion).reward == 0.0


@pytest.mark.parametrize(
    ("task", "completion"),
    [
        (SUM, r"Adding: $\frac{9}{12}+\frac{10}{12} = \boxed{\dfrac{19}{12}}$."),
        (SUM, r"\boxed{19/12}"),
        (SUM, r"\boxed{\tfrac{19}{12}\,}"),
        (SUM, r"\boxed{1.583333}"),
        (SUM, "19/12"),  # a bare answer, no box
        (DIFFERENCE, r"\boxed{-\frac{1}{2}}"),
        (DIFFERENCE, r"\boxed{\frac{-1}{2}}"),
        (DIFFERENCE, r"\boxed{-0.5}"),
        (WHOLE, r"\boxed{1}"),
        (WHOLE, r"\boxed{1.0}"),
    ],
)
def test_math_env_pays_every_simplest_form(task, completion):
    env = make_env("math")
    env.reset(task)
    assert env.step(completion).reward == 1.0


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, cpu_seconds=2, wall_timeout_s=5.0) as sb:
        yield sb


def test_python_code_runs_hidden_tests_in_the_sandbox(sandbox):
    env = make_env("python_code", sandbox=sandbox, max_turns=2)
    task = next(t for t in env.tasks(50, seed=0) if t.metadata["function"] == "fib")
    assert env.reset(task) == (
        "Write a Python function fib(n) that returns the n-th Fibonacci number, fib(0) = 0 and fib(1) = 1. "
        "For example, fib(173) == 638817435613190341905763972389505493. Answer with the code in a ```python block."
    )
    assert [args for args, _ in task.metadata["cases"]] == [(225,), (151,), (169,), (194,), (205,), (256,), (289,), (96,), (135,), (260,)]
    right = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
    wrong = f"```python\n{right}\n_right = fib\n\ndef fib(n):\n    return _right(n) if n < 200 else 0\n```"  # 5 of 10 cases
    assert env.step(wrong) == StepResult("5 of 10 hidden tests failed. Try again.", None, False)
    assert env.step(wrong) == StepResult(None, 0.5, True, {})  # the last turn scores its pass rate
    env.reset(task)
    assert env.step(f"```python\n{right}```") == StepResult(None, 1.0, True, {})
    env.reset(task)
    assert env.step("I don't know.").observation == "No ```python block that parses and defines fib found. Try again."


def test_reasoning_gym_adapter_scores_with_the_dataset():
    env = make_env("reasoning_gym", dataset="basic_arithmetic", min_terms=2, max_terms=2, min_digits=1, max_digits=1)
    tasks = env.tasks(4, seed=3)
    assert tasks == env.tasks(4, seed=3) and tasks != env.tasks(4, seed=4)
    task = tasks[0]
    assert task.prompt.endswith("\nGive your final answer inside <answer></answer>.")
    env.reset(task)
    assert env.step(f"Thinking... <answer>{task.answer}</answer>").reward == 1.0
    assert env.step(f"<answer>{int(task.answer) + 1}</answer>").reward == 0.0


def test_reasoning_gym_unknown_dataset_is_one_sentence():
    with pytest.raises(ValueError, match=r"^unknown reasoning-gym dataset 'basic_arith' \(known: .*basic_arithmetic, .*\)$"):
        make_env("reasoning_gym", dataset="basic_arith")
