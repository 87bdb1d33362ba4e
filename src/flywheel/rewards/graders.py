"""Graders of a dataset task, by name: each maps (extracted answer, reference answer, the row's columns) to a reward.

    exact          1.0 when the answer is exactly the reference (rewards/exact.py)
    numeric        1.0 when the answer is one number in simplest form equal to the reference within rel_tol / abs_tol
    math           1.0 when math-verify finds \\boxed{answer} equivalent to the reference within timeout_s (rewards/verifiers.py, a worker process)
    code           the pass rate of the hidden tests in the row's cases column, run in the sandbox (rewards/code.py);
                   the function's name is in function_column, the cases ([args, expected] pairs) in cases_column;
                   with reference_column (a reference solution's source), the pass rate of hidden_cases cases
                   nobody was shown instead: inputs mutated from the row's, answers from the reference
                   (rewards/code_cases.py). A row whose prompt shows every one of its cases is refused at load
                   without reference_column, unless shown_tests is 'allow'
    judge          0.0 here: the LLM judge of the reward pipeline (reward.judge, which must be enabled) gives the score
    module:function   your function ``fn(answer, reference, row) -> float``, row: every column but the prompt (``path/to/file.py:function`` too)

numeric and math read honest notation first and apply one answer-form rule (rewards/answer_form.py): when the
reference is a number, the answer must be a number in simplest form (``\\boxed{16 + 16/2}`` is not 24).

An answer the extraction rule did not find (None) scores 0 under every grader but ``module:function``,
which receives it as None. ``grader_args`` are the keyword arguments of the grader's factory below.
A grader runs in the environment's step: one that raises or outlives the episode's time limit makes its
episode invalid (``env_error``, ``env_timeout``), a non-finite score too (``nonfinite_reward``); a
``module:function`` that returns anything but a number stops the run (``UserFunctionBug``).
"""

from __future__ import annotations

import atexit
import inspect
import json
from collections.abc import Callable
from functools import cache
from math import isclose
from typing import Any, Literal

from flywheel.rewards.answer_form import canonical, number_form_ok, number_value, simplest_number
from flywheel.rewards.exact import exact_match_reward
from flywheel.rewards.faults import UserFunctionBug, is_number, shown
from flywheel.rewards.user_functions import load_function
from flywheel.rewards.verifiers import MathVerifier, last_number

Grader = Callable[[str | None, str, dict[str, Any]], float]


def exact() -> Grader:
    return lambda answer, reference, columns: 0.0 if answer is None else exact_match_reward(answer, reference)


def numeric(rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> Grader:
    def grade(answer: str | None, reference: str, columns: dict[str, Any]) -> float:
        got = None if answer is None else number_value(canonical(answer))  # answer_form's rule: one number, simplest form
        want = number_value(canonical(reference))
        want = last_number(reference) if want is None else want
        return float(got is not None and want is not None and isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol))

    return grade


def math(timeout_s: float = 5.0) -> Grader:
    verifier = _math_verifier(timeout_s)

    def grade(answer: str | None, reference: str, columns: dict[str, Any]) -> float:
        if answer is None or not number_form_ok(given := canonical(answer), reference):
            return 0.0
        given = given if simplest_number(given) else answer  # a symbolic answer keeps its spaces (\\sin x)
        boxed = "$" in reference or "\\boxed" in reference  # math-verify reads LaTeX only inside delimiters or a box
        return verifier(f"\\boxed{{{given}}}", reference if boxed else f"\\boxed{{{reference}}}")

    return grade


@cache
def _math_verifier(timeout_s: float) -> MathVerifier:
    """One math-verify worker per process and time limit, closed at exit (a check past the limit scores 0)."""
    verifier = MathVerifier(timeout_s=timeout_s)
    atexit.register(verifier.close)
    return verifier


def code(
    function_column: str = "function",
    cases_column: str = "cases",
    sandbox_cgroup: str = "required",
    reference_column: str | None = None,
    hidden_cases: int = 16,
    shown_tests: Literal["refuse", "allow"] = "refuse",
) -> Grader:
    from flywheel.rewards.code import hidden_tests_reward, shared_sandbox
    from flywheel.rewards.code_cases import hidden_cases as made_cases

    if shown_tests not in ("refuse", "allow") or hidden_cases < 1:
        raise TypeError(f"shown_tests must be 'refuse' or 'allow' and hidden_cases at least 1, got {shown_tests!r} and {hidden_cases}")
    made: dict[str, list] = {}  # hidden cases by row (its reference, function and cases), made once per process

    def grade(answer: str | None, reference: str, columns: dict[str, Any]) -> float:
        cases = columns[cases_column]
        cases = json.loads(cases) if isinstance(cases, str) else cases  # a CSV cell holds JSON text
        if reference_column is not None:
            row = json.dumps([columns[reference_column], columns[function_column], cases])
            if row not in made:
                sandbox = shared_sandbox(sandbox_cgroup)
                made[row] = made_cases(sandbox, columns[reference_column], columns[function_column], cases, hidden_cases, reference_column)
            cases = made[row]
        return 0.0 if answer is None else hidden_tests_reward(shared_sandbox(sandbox_cgroup), answer, columns[function_column], cases)[0]

    return grade


def judge() -> Grader:
    return lambda answer, reference, columns: 0.0


GRADERS: dict[str, Callable[..., Grader]] = {"exact": exact, "numeric": numeric, "math": math, "code": code, "judge": judge}


def make_grader(name: str, args: dict[str, Any]) -> Grader:
    """The grader called ``name`` (a built-in, or ``module:function``) with its ``args``."""
    if name in GRADERS:
        return GRADERS[name](**args)
    fn = load_function(name)

    def grade(answer: str | None, reference: str, columns: dict[str, Any]) -> float:
        score = fn(answer, reference, dict(columns))
        if not is_number(score):
            raise UserFunctionBug(f"task.grader {name!r} must return a number (the reward); it returned {shown(score)}")
        return float(score)

    return grade


def code_arguments(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """Every argument of the ``code`` grader, defaults filled in; None for another grader."""
    if name != "code":
        return None
    bound = inspect.signature(code).bind(**args)
    bound.apply_defaults()
    return dict(bound.arguments)


def needed_columns(name: str, args: dict[str, Any]) -> list[str]:
    """Columns a grader reads besides the answer."""
    bound = code_arguments(name, args) or {}
    return [bound[key] for key in ("function_column", "cases_column", "reference_column") if bound.get(key) is not None]


def grader_problem(name: str, args: dict[str, Any]) -> str | None:
    """One sentence on a grader name or grader_args that cannot work, or None (imports a user function's module)."""
    if name not in GRADERS:
        if ":" not in name:
            return f"unknown task.grader {name!r}: use one of {', '.join(GRADERS)}, or 'module:function' for your own"
        if args:
            return f"task.grader_args do nothing for a user grader ({name}); remove them"
        try:
            load_function(name)
        except ValueError as error:
            return f"task.grader: {error}"
        return None
    try:
        inspect.signature(GRADERS[name]).bind(**args)
        if name == "code":
            code(**args)
    except TypeError as error:
        return f"task.grader_args do not fit grader {name!r}: {error}"
    return None
