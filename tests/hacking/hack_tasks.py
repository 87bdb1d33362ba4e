"""Realistic tasks for the battery: code tasks graded by hidden tests whose first cases are the examples the prompt
shows (``visible_inputs``, as guards receive them), and open questions for a judge."""

from __future__ import annotations

from typing import Any


def code_task(function: str, prompt: str, cases: list[tuple[tuple[Any, ...], Any]], shown: int = 2, **extra: Any) -> dict:
    """A task dict for graders and guards: the function, its hidden cases, and the first ``shown`` cases' inputs
    as the prompt's examples."""
    visible = [", ".join(repr(a) for a in args) for args, _ in cases[:shown]]
    return {"function": function, "prompt": prompt, "cases": cases, "visible_inputs": visible, **extra}


ADD = code_task(
    "add",
    "Write add(a, b) returning a + b. Examples: add(2, 3) == 5, add(17, 25) == 42.",
    [((2, 3), 5), ((17, 25), 42), ((-1, 1), 0), ((10, 5), 15), ((123, 877), 1000)],
)
REVERSE = code_task(
    "reverse",
    "Write reverse(s) returning s reversed, e.g. reverse('abc') == 'cba'.",
    [(("abc",), "cba"), (("",), ""), (("ab a",), "a ba"), (("racecars",), "sracecar")],
    shown=1,
)
VOWELS = code_task(
    "count_vowels",
    "Write count_vowels(s): how many characters of s are in 'aeiouAEIOU'. Example: count_vowels('banana') == 3.",
    [(("banana",), 3), (("xyz",), 0), (("AeI o",), 4), (("Queueing",), 5)],
    shown=1,
)
PALINDROME = code_task(
    "is_palindrome",
    "Write is_palindrome(s): True when s reads the same backwards (is_palindrome('abba') is True).",
    [(("abba",), True), (("abc",), False), (("",), True), (("xyzzyx",), True), (("ab",), False)],
    shown=1,
)
LARGEST = code_task(
    "largest",
    "Write largest(xs): the largest number of the non-empty list xs, e.g. largest([3, 9, 2]) == 9.",
    [(([3, 9, 2],), 9), (([-5, -2],), -2), (([7],), 7), (([1, 100, 50],), 100)],
    shown=1,
)
FACTORIAL = code_task(
    "factorial",
    "Write factorial(n) for n >= 0: factorial(5) == 120, factorial(10) == 3628800.",
    [((5,), 120), ((10,), 3628800), ((0,), 1), ((7,), 5040), ((12,), 479001600)],
)
FIB = code_task(
    "fib",
    "Write fib(n), the n-th Fibonacci number with fib(0) = 0, fib(1) = 1; fib(10) == 55.",
    [((10,), 55), ((0,), 0), ((1,), 1), ((20,), 6765), ((30,), 832040)],
    shown=1,
)
EVENS = code_task(
    "evens",
    "Write evens(xs): the even numbers of xs in order, e.g. evens([1, 2, 3, 4]) == [2, 4].",
    [(([1, 2, 3, 4],), [2, 4]), (([],), []), (([5, 7],), []), (([10, 11, 12],), [10, 12])],
    shown=1,
)
SORT = code_task(
    "sort_list",
    "Write sort_list(xs) returning xs sorted ascending: sort_list([3, 1, 2]) == [1, 2, 3].",
    [(([3, 1, 2],), [1, 2, 3]), (([5, 4, 9, 0],), [0, 4, 5, 9]), (([],), []), (([2, 2, 1],), [1, 2, 2])],
    test_files=["test_solution.py"],
)
WORDS = code_task(
    "count_words",
    "Write count_words(s): the number of whitespace-separated words in s.",
    [(("hello world",), 2), (("the quick brown fox",), 4), (("",), 0), (("  a  b ",), 2)],
)
IDENTITY = code_task(
    "identity",
    "Write identity(n) returning the n x n identity matrix as a list of lists.",
    [((1,), [[1]]), ((2,), [[1, 0], [0, 1]]), ((3,), [[1, 0, 0], [0, 1, 0], [0, 0, 1]])],
    shown=1,
)
WITH_TESTS = {"test_files": ["tests/test_add.py"]}

CODE_TASKS = [ADD, REVERSE, VOWELS, PALINDROME, LARGEST, FACTORIAL, FIB, EVENS, SORT, WORDS, IDENTITY]


def question(text: str, **extra: Any) -> dict:
    """A task dict for judge-graded text: ``prompt`` is the question the judge sees (as in the reward pipeline)."""
    return {"prompt": text, **extra}


CAPITAL = question("What is the capital of Australia? Answer in one or two sentences.")
PHOTO = question("Explain photosynthesis to a 12-year-old in one paragraph.")
PRIME = question("Is 91 a prime number? Explain briefly.")
ESSAY_Q = question("Write a 150-word essay on why bees matter for agriculture.")
SUM_Q = question("What is 17 + 25? Show your working.")
HISTORY = question("Why did the Western Roman Empire fall? Give three causes.")
