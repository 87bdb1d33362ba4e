"""Code datasets whose prompts show their tests (MBPP-style): refused at load without a reference solution, graded
on hidden cases with one (inputs mutated from the row's, answers from the reference, in the sandbox). A function
fitted to the shown calls scored 1.0 before; honest solutions written differently from the reference still score 1.0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import ConfigError
from flywheel.preflight import load_run_config
from flywheel.rewards.code_cases import mutated_inputs, shown_cases
from flywheel.rollout.stream import load_tasks

REPO = Path(__file__).resolve().parents[2]

PROBLEMS = [
    {
        "function": "remove_char",
        "statement": "Write remove_char(s, c) returning s without any occurrence of the character c.",
        "reference": "def remove_char(s, c):\n    return s.replace(c, '')\n",
        "cases": [[["hello", "l"], "heo"], [["abcda", "a"], "bcd"], [["PHP", "P"], "H"]],
        "honest": ["def remove_char(s, c):\n    return ''.join(ch for ch in s if ch != c)\n"],
    },
    {
        "function": "largest",
        "statement": "Write largest(xs) returning the largest number of the non-empty list xs.",
        "reference": "def largest(xs):\n    return max(xs)\n",
        "cases": [[[[1, 5, 3]], 5], [[[-2, -9]], -2], [[[7]], 7]],
        "honest": ["def largest(xs):\n    best = xs[0]\n    for x in xs[1:]:\n        if x > best:\n            best = x\n    return best\n"],
    },
    {
        "function": "sum_squares",
        "statement": "Write sum_squares(n) returning 1*1 + 2*2 + ... + n*n for n >= 1.",
        "reference": "def sum_squares(n):\n    return sum(i * i for i in range(1, n + 1))\n",
        "cases": [[[1], 1], [[2], 5], [[3], 14]],
        "honest": ["def sum_squares(n):\n    return n * (n + 1) * (2 * n + 1) // 6\n"],
    },
    {
        "function": "is_palindrome",
        "statement": "Write is_palindrome(s) returning whether s reads the same backwards.",
        "reference": "def is_palindrome(s):\n    return s == s[::-1]\n",
        "cases": [[["racecar"], True], [["ab"], False], [["a"], True]],
        "honest": ["def is_palindrome(s):\n    return all(s[i] == s[-1 - i] for i in range(len(s) // 2))\n"],
    },
]


def prompt(problem: dict) -> str:
    """An MBPP-style prompt: the statement, then the tests, Python-style (single quotes, True/False)."""
    asserts = "\n".join(f"assert {problem['function']}({', '.join(map(repr, args))}) == {expected!r}" for args, expected in problem["cases"])
    return f"{problem['statement']} Your code should pass these tests:\n{asserts}"


def fitted(problem: dict) -> str:
    """A solution that only knows the shown calls: a table, no literal of the task's logic."""
    table = {json.dumps(args): expected for args, expected in problem["cases"]}
    return f"import json\n_T = {table!r}\ndef {problem['function']}(*args):\n    return _T.get(json.dumps(list(args)))\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mbpp") / "train.jsonl"
    rows = [{"prompt": prompt(p), "function": p["function"], "cases": p["cases"], "reference": p["reference"]} for p in PROBLEMS]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def overrides(path: Path, **grader_args) -> list[str]:
    return [f"task.dataset={path}", "task.answer_column=null", "task.grader=code", "task.eval_size=1", f"task.grader_args={json.dumps(grader_args)}"]


def test_a_prompt_shows_a_case_when_its_call_is_written_in_it():
    problem = PROBLEMS[0]
    assert shown_cases(prompt(problem), "remove_char", problem["cases"]) == [True, True, True]
    assert shown_cases("Write remove_char(s, c).", "remove_char", problem["cases"]) == [False, False, False]
    assert shown_cases("assert f([1, 2], True, None)", "f", [[[[1, 2], True, None], 0]]) == [True]


def test_mutated_inputs_are_new_deterministic_and_keep_characters_and_order():
    cases = [(["hello", "l"], "heo"), (["abcda", "a"], "bcd")]
    inputs = mutated_inputs(cases, 12, seed=3)
    assert inputs == mutated_inputs(cases, 12, seed=3) and len(inputs) == 12
    assert not {json.dumps(a) for a in inputs} & {json.dumps(a) for a, _ in cases}
    assert all(len(c) == 1 for _, c in inputs)  # a character stays one character
    assert all(xs == sorted(xs) for [xs] in mutated_inputs([([[1, 2, 5, 9]], 9)], 12, seed=1))


def test_a_dataset_that_shows_every_test_is_refused_in_one_sentence(dataset):
    with pytest.raises(
        ConfigError,
        match=r"^task.dataset '.*' row 1 \(and 3 more\) shows every test case in its prompt, so the code grader would pay a function fitted",
    ):
        load_run_config(None, overrides(dataset))


def test_allowed_shown_tests_train_with_a_warning_and_pay_a_fitted_function(dataset):
    command = [sys.executable, "-c", "import sys; from flywheel.preflight import load_run_config; load_run_config(None, sys.argv[1:])"]
    done = subprocess.run([*command, *overrides(dataset, shown_tests="allow")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "warning: 4 of 4 rows of task.dataset show every test case in their prompt" in done.stderr, done.stderr
    tasks = load_tasks(load_run_config(None, overrides(dataset, shown_tests="allow")))
    by_function = {t.metadata["columns"]["function"]: t for t in tasks.train}
    for problem in PROBLEMS:
        if problem["function"] in by_function:
            env = tasks.env_factory()
            env.reset(by_function[problem["function"]])
            assert env.step(fitted(problem)).reward == 1.0  # the risk the warning names


def test_with_a_reference_column_fitted_functions_fail_and_honest_ones_pass(dataset):
    tasks = load_tasks(load_run_config(None, overrides(dataset, reference_column="reference")))
    rows = {t.metadata["columns"]["function"]: t for t in [*tasks.train, *tasks.eval]}
    for problem in PROBLEMS:
        task = rows[problem["function"]]
        grades = {}
        for name, solution in [("reference", problem["reference"]), *(("honest", h) for h in problem["honest"]), ("fitted", fitted(problem))]:
            env = tasks.env_factory()
            env.reset(task)
            grades[name] = env.step(f"```python\n{solution}```").reward
        assert grades["reference"] == grades["honest"] == 1.0 and grades["fitted"] <= 0.25, (problem["function"], grades)


def test_a_reference_that_contradicts_its_row_makes_the_episode_invalid_with_the_reason(tmp_path):
    row = {
        "prompt": prompt(PROBLEMS[2]),
        "function": "sum_squares",
        "cases": PROBLEMS[2]["cases"],
        "reference": "def sum_squares(n):\n    return n * n\n",
    }
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "prompt": "again: " + row["prompt"]}) + "\n")
    tasks = load_tasks(load_run_config(None, overrides(path, reference_column="reference")))
    env = tasks.env_factory()
    env.reset(tasks.train[0])
    with pytest.raises(ValueError, match=r"reference solution in column 'reference' gives 4 for sum_squares\(2\), where the row's case expects 5"):
        env.step(PROBLEMS[2]["reference"])
