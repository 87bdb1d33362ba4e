"""The python_code problem bank through the real sandbox: references score 1.0, memorised cases do not pay."""

import ast
import inspect
import json
import random
import re

import pytest

from flywheel.envs import code_problems
from flywheel.envs.code_problems import PROBLEMS
from flywheel.envs.python_code import make_task
from flywheel.envs.registry import make_env
from flywheel.rewards.code import hidden_tests_reward
from flywheel.sandbox import Sandbox


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, cpu_seconds=2, wall_timeout_s=5.0) as sb:
        yield sb


def first_task_per_function(seed):
    env = make_env("python_code", sandbox=object())  # tasks() never touches the sandbox
    tasks = {}
    for task in env.tasks(400, seed=seed):
        tasks.setdefault(task.metadata["function"], task)
    return tasks


def lookup_table(function, cases):
    """A 'solution' that answers the memorised cases and nothing else (KeyError elsewhere)."""
    table = {json.dumps(list(args)): value for args, value in cases}
    return f"```python\nimport json\nTABLE = {table!r}\ndef {function}(*args):\n    return TABLE[json.dumps(list(args))]\n```"


def test_the_bank_has_distinct_problems_and_every_one_is_drawn():
    names = [p.name for p in PROBLEMS]
    assert len(names) == 26 and len(set(names)) == 26
    assert sorted(first_task_per_function(seed=0)) == sorted(names)


def test_hidden_cases_come_from_the_seed():
    env = make_env("python_code", sandbox=object(), hidden_cases=7)
    tasks = env.tasks(3, seed=5)
    assert tasks == env.tasks(3, seed=5) and [len(t.metadata["cases"]) for t in tasks] == [7, 7, 7]
    assert [t.metadata["cases"] for t in tasks] == [t.metadata["cases"] for t in env.tasks(3, seed=5)]
    assert [t.metadata["cases"] for t in tasks] != [t.metadata["cases"] for t in env.tasks(3, seed=6)]


def test_the_prompt_states_the_problem_and_one_example():
    problem = next(p for p in PROBLEMS if p.name == "add")
    task = make_task(problem, random.Random(0), hidden_cases=2)
    assert task.prompt == (
        "Write a Python function add(a, b) that returns a + b. For example, add(589545, -915099) == -325554. "
        "Answer with the code in a ```python block."
    )
    assert task.metadata == {"function": "add", "cases": [((72220, 925676), 997896), ((-363908, -249117), -613025)]}


def test_every_reference_solution_scores_one_on_its_generated_cases(sandbox):
    for function, task in first_task_per_function(seed=0).items():
        source = inspect.getsource(getattr(code_problems, function))
        reward, report = hidden_tests_reward(sandbox, f"```python\n{source}```", function, task.metadata["cases"])
        assert (function, reward, report.total) == (function, 1.0, 10)


def visible_example(task):
    """The (args, value) of the example in a task's prompt: '... For example, f(1, [2]) == 3. Answer ...'."""
    call, value = re.search(r"For example, \w+\((.*)\) == (.*)\. Answer with", task.prompt).groups()
    return ast.literal_eval(f"({call},)"), ast.literal_eval(value)


def test_a_lookup_table_of_fixed_cases_scores_near_zero_on_a_tasks_hidden_cases(sandbox):
    # memorised: every case of another task of the same problem, and this task's visible example
    memorised, graded = first_task_per_function(seed=0), first_task_per_function(seed=1)
    rates = {}
    for function, task in memorised.items():
        cases = task.metadata["cases"]
        completion = lookup_table(function, [*cases, visible_example(graded[function])])
        assert hidden_tests_reward(sandbox, completion, function, cases)[0] == 1.0  # it does memorise
        rates[function] = hidden_tests_reward(sandbox, completion, function, graded[function].metadata["cases"])[0]
    # only inputs drawn by both tasks repeat (an empty string, a bound, two fib(n) with n <= 300): 6 of 260 cases
    assert {f: r for f, r in rates.items() if r} == {"count_words": 0.1, "count_vowels": 0.1, "to_binary": 0.2, "fib": 0.2}
