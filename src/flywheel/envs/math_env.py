"""Fraction arithmetic: the answer must be a number in simplest form, then equal to the result by math-verify.

The form check comes first (``flywheel.rewards.answer_form.simplest_number``): 19/12, \\frac{19}{12},
\\dfrac{19}{12} and 1.583333 (math-verify compares decimals to 6 places) score 1; the question restated
(\\frac{3}{4}+\\frac{5}{6}), an unreduced 38/24 or a mixed 1\\frac{7}{12} score 0, although equal.
"""

from __future__ import annotations

import atexit
import random
from fractions import Fraction
from functools import cache

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env
from flywheel.rewards.answer_form import final_answer, simplest_number
from flywheel.rewards.verifiers import MathVerifier


@cache
def shared_verifier() -> MathVerifier:
    """One MathVerifier (worker process) per process, closed at exit."""
    verifier = MathVerifier()
    atexit.register(verifier.close)
    return verifier


@register_env("math")
class MathEnv:
    """One turn: the last \\boxed{} answer (else the whole reply) must be a number in simplest form equal to the task's answer."""

    max_turns, tools, stop = 1, (), ()

    def __init__(self, verifier: MathVerifier | None = None, time_limit_s: float = 60.0, system_prompt: str | None = None) -> None:
        self.verifier = verifier or shared_verifier()
        self.time_limit_s, self.system_prompt = time_limit_s, system_prompt

    def tasks(self, size: int, seed: int) -> list[Task]:
        rng = random.Random(seed)
        tasks = []
        for _ in range(size):
            a, b, c, d = (rng.randint(1, 12) for _ in range(4))
            op = rng.choice("+-")
            value = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
            tasks.append(Task(f"Compute {a}/{b} {op} {c}/{d}. Put the simplified answer in \\boxed{{}}.", str(value)))
        return tasks

    def reset(self, task: Task) -> str:
        self.answer = task.answer
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        answer = final_answer(model_text)
        return final(self.verifier(f"\\boxed{{{answer}}}", self.answer) if simplest_number(answer) else 0.0)
