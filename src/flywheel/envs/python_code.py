"""Write a Python function; graded by hidden tests in the sandbox (reward: the pass rate).

With ``max_turns > 1`` a failing attempt gets one line of feedback (how many hidden tests failed,
never which) and another try; the last attempt's pass rate is the reward.
"""

from __future__ import annotations

import atexit
import random
from functools import cache
from typing import Any

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env
from flywheel.rewards.code import hidden_tests_reward
from flywheel.sandbox import Sandbox

# (function, signature, what it does, hidden cases as (args, expected))
PROBLEMS: list[tuple[str, str, str, list[tuple[tuple[Any, ...], Any]]]] = [
    ("add", "add(a, b)", "returns a + b", [((2, 3), 5), ((-1, 1), 0), ((10, 5), 15)]),
    ("reverse", "reverse(s)", "returns the string s reversed", [(("abc",), "cba"), (("",), ""), (("ab a",), "a ba")]),
    ("count_vowels", "count_vowels(s)", "returns how many of the characters of s are in 'aeiouAEIOU'", [(("banana",), 3), (("xyz",), 0), (("AeI o",), 4)]),
    ("is_palindrome", "is_palindrome(s)", "returns True when s reads the same backwards", [(("abba",), True), (("abc",), False), (("",), True)]),
    ("largest", "largest(xs)", "returns the largest number of the non-empty list xs", [(([3, 9, 2],), 9), (([-5, -2],), -2), (([7],), 7)]),
    ("factorial", "factorial(n)", "returns n! for n >= 0", [((0,), 1), ((5,), 120), ((10,), 3628800)]),
    ("fib", "fib(n)", "returns the n-th Fibonacci number, fib(0) = 0 and fib(1) = 1", [((0,), 0), ((1,), 1), ((10,), 55), ((20,), 6765)]),
    ("evens", "evens(xs)", "returns the even numbers of the list xs, in order", [(([1, 2, 3, 4],), [2, 4]), (([],), []), (([5, 7],), [])]),
]


@cache
def shared_sandbox() -> Sandbox:
    """One sandbox pool per process, started on first use and closed at exit."""
    sandbox = Sandbox(workers=2, cpu_seconds=5, memory_mb=512, wall_timeout_s=10)
    sandbox.start()
    atexit.register(sandbox.close)
    return sandbox


@register_env("python_code")
class PythonCodeEnv:
    tools, stop = (), ()

    def __init__(self, sandbox: Sandbox | None = None, max_turns: int = 1, time_limit_s: float = 120.0, system_prompt: str | None = None) -> None:
        self.sandbox = sandbox or shared_sandbox()
        self.max_turns, self.time_limit_s, self.system_prompt = max_turns, time_limit_s, system_prompt

    def tasks(self, size: int, seed: int) -> list[Task]:
        rng = random.Random(seed)
        picked = [rng.choice(PROBLEMS) for _ in range(size)]
        return [
            Task(f"Write a Python function {signature} that {what}. Answer with the code in a ```python block.", metadata={"function": name, "cases": cases})
            for name, signature, what, cases in picked
        ]

    def reset(self, task: Task) -> str:
        self.function, self.cases, self.turn = task.metadata["function"], task.metadata["cases"], 0
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        self.turn += 1
        reward, report = hidden_tests_reward(self.sandbox, model_text, self.function, self.cases)
        if reward == 1.0 or self.turn == self.max_turns:
            return final(reward)
        feedback = "No Python code found." if report is None else f"{report.total - report.passed} of {report.total} hidden tests failed."
        return StepResult(f"{feedback} Try again.", None, False)
