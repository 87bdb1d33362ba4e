"""User code that fails, for the fault tests (tests/unit/test_reward_faults.py, tests/unit/test_input_checks.py,
tests/integration/test_bad_episodes.py): reward functions, graders and an environment, each broken one way.
Configs name them by path (``reward.functions=[tests/faulty_user_code.py:...]``) or import this module
(``task.imports=[faulty_user_code]`` with tests/ on the path)."""

import math
import re
import time

from flywheel.envs.arithmetic import ArithmeticEnv
from flywheel.envs.base import final
from flywheel.envs.registry import register_env


def first_digit(prompt: str) -> int:
    return int(re.search(r"\d", prompt).group())


def raises_on_some_prompts(prompts, completions, **kwargs):
    """Raises for prompts whose first digit is a multiple of 3 (0, 3, 6, 9); else 0.5 per completion."""
    if first_digit(prompts[0]) % 3 == 0:
        raise ZeroDivisionError("a reward function bug")
    return [0.5] * len(completions)


def slow_on_some_prompts(prompts, completions, **kwargs):
    """Sleeps 3 s for prompts whose first digit is 1 or 2 (past a short reward.function_timeout_s); else 0.0."""
    if first_digit(prompts[0]) in (1, 2):
        time.sleep(3)
    return [0.0] * len(completions)


def always_slow(completions, **kwargs):
    """Sleeps 5 s, then 0.0 per completion: past any short time limit."""
    time.sleep(5)
    return [0.0] * len(completions)


def returns_text(completions, **kwargs):
    """A bug: numbers as text."""
    return ["1.0"] * len(completions)


def returns_one_value(completions, **kwargs):
    """A bug: one score for the whole group."""
    return [1.0]


def grader_raises(answer, reference, row):
    raise RuntimeError("the grader is broken")


def grader_returns_text(answer, reference, row):
    return "correct"


@register_env("nan_arithmetic")
class NanArithmetic(ArithmeticEnv):
    """The quickstart task with a reward that is always NaN."""

    def step(self, model_text: str):
        return final(math.nan)
