"""Graders of dataset tasks by name: the existing verifiers (exact, numeric, math-verify, hidden tests in the
real sandbox), the judge's placeholder and a user's function with the row's columns."""

import pytest

from flywheel.rewards.graders import grader_problem, make_grader


def test_exact():
    grade = make_grader("exact", {})
    assert [grade("72", "72", {}), grade(" 72\n", "72", {}), grade("72.0", "72", {}), grade(None, "72", {})] == [1.0, 1.0, 0.0, 0.0]


def test_numeric_tolerances():
    assert make_grader("numeric", {})("72.0", "72", {}) == 1.0
    loose = make_grader("numeric", {"rel_tol": 0.01})
    # |100.9 - 100| = 0.9 <= 0.01 * 100.9; |102 - 100| = 2 > 1.02
    assert [loose("100.9", "100", {}), loose("102", "100", {}), loose(None, "100", {})] == [1.0, 0.0, 0.0]


def test_math_verify_equivalence():
    grade = make_grader("math", {"timeout_s": 60.0})  # the first check imports math-verify in the worker: slow on a busy machine
    assert [grade(r"\frac{1}{2}", "0.5", {}), grade("0.5", r"\frac{1}{2}", {}), grade("3", "0.5", {}), grade(None, "1", {})] == [1.0, 1.0, 0.0, 0.0]
    assert grade(r"\sqrt{2}/2", r"\frac{\sqrt{2}}{2}", {}) == 1.0  # a symbolic reference: any form is compared


# Written the way honest solutions write numbers (issue 33's list first): each is the reference's number.
HONEST = [
    ("\u221212", "-12"),
    (r"\frac1{33}", r"\frac{1}{33}"),
    (r"\displaystyle \frac{3}{4}", "0.75"),
    (r"\mathbf{42}", "42"),
    (r"\left( \frac{1}{2} \right)", "0.5"),
    (r"0.\overline{3}", r"\frac{1}{3}"),
    ("0.(142857)", "1/7"),
    (r"0.1\dot{6}", "1/6"),
    ("1,000", "1000"),
    ("1{,}250", "1250"),
    (r"18 \text{ dollars}", "18"),
    (r"45^\circ", "45"),
    (r"\$ 2.50", "2.5"),
    ("\u20133", "-3"),
]

# Answers that are not a number in simplest form, each "equal" to the reference in some reading.
UNEVALUATED = [
    (r"16 + 16/2", "24"),  # the question's arithmetic, unevaluated
    ("0+24", "24"),
    ("20, 21, 22, 23, 24", "24"),  # candidates
    (r"24 \text{ or } 25", "24"),
    ("2*12", "24"),
    (r"\frac{48}{2}", "24"),  # not reduced
    ("x = 24", "24"),
    (r"24 \approx 24.0", "24"),
]


@pytest.mark.parametrize(("answer", "reference"), HONEST)
@pytest.mark.parametrize("name", ["numeric", "math"])
def test_honest_notations_of_the_right_number_are_paid(name, answer, reference):
    assert make_grader(name, {"timeout_s": 60.0} if name == "math" else {})(answer, reference, {}) == 1.0


@pytest.mark.parametrize(("answer", "reference"), UNEVALUATED)
@pytest.mark.parametrize("name", ["numeric", "math"])
def test_an_answer_that_is_not_one_number_in_simplest_form_is_not_paid_for_a_number(name, answer, reference):
    assert make_grader(name, {"timeout_s": 60.0} if name == "math" else {})(answer, reference, {}) == 0.0


def test_code_runs_the_rows_hidden_tests_in_the_sandbox():
    grade = make_grader("code", {"function_column": "fn", "cases_column": "tests"})
    row = {"fn": "add", "tests": [[[2, 3], 5], [[-1, 1], 0], [[10, 5], 15], [[0, 0], 0]]}
    # a + b when a > 0, else a * b: (2, 3) pass, (-1, 1) -> -1 fails, (10, 5) pass, (0, 0) pass
    assert grade("```python\ndef add(a, b):\n    return a + b if a > 0 else a * b\n```", "", row) == 0.75
    as_csv = {"fn": "add", "tests": "[[[2, 3], 5], [[1, 1], 2]]"}  # a CSV cell holds the cases as JSON text
    assert grade("def add(a, b):\n    return a + b\n", "", as_csv) == 1.0


def test_judge_leaves_the_score_to_the_pipeline():
    assert make_grader("judge", {})("anything", "", {}) == 0.0


def test_user_function_gets_answer_reference_and_columns(tmp_path, monkeypatch):
    (tmp_path / "my_grader.py").write_text("def grade(answer, reference, row):\n    return float(answer == reference) + row['bonus']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    grade = make_grader("my_grader:grade", {})
    assert grade("7", "7", {"bonus": 0.5}) == 1.5 and grade("8", "7", {"bonus": 0.0}) == 0.0


@pytest.mark.parametrize(
    ("name", "args", "problem"),
    [
        ("fuzzy", {}, "unknown task.grader 'fuzzy': use one of exact, numeric, math, code, judge, or 'module:function' for your own"),
        ("numeric", {"tol": 1}, "task.grader_args do not fit grader 'numeric': got an unexpected keyword argument 'tol'"),
        ("no_such_mod:fn", {}, "task.grader: cannot import 'no_such_mod' for 'no_such_mod:fn' (ModuleNotFoundError: No module named 'no_such_mod')"),
        ("flywheel.rewards.exact:nope", {"x": 1}, "task.grader_args do nothing for a user grader (flywheel.rewards.exact:nope); remove them"),
        ("exact", {}, None),
    ],
)
def test_problems_are_one_sentence(name, args, problem):
    assert grader_problem(name, args) == problem
