"""The quickstart task: multi-digit addition with an exact-answer verifier, as the ``arithmetic`` environment.

A task is the prompt ``"123+456="`` and the answer ``"579"``. Splits are generated from a seed,
so every run (and the asset script's warm-up) sees the same problems; the eval split never shares
a problem with the train split.
"""

from __future__ import annotations

import random

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env
from flywheel.rewards.exact import exact_match_reward

#: Characters the task uses; the tiny model's tokenizer has exactly one token per character.
ALPHABET = "0123456789+="


def _problem(rng: random.Random, digits: int) -> Task:
    high = 10**digits - 1
    a, b = rng.randint(0, high), rng.randint(0, high)
    return Task(prompt=f"{a}+{b}=", answer=str(a + b))


def make_splits(seed: int, digits: int, train_size: int, eval_size: int) -> tuple[list[Task], list[Task]]:
    """Deterministic, disjoint train and eval splits of distinct problems."""
    space = 10 ** (2 * digits)
    if train_size + eval_size > space // 2:
        raise ValueError(f"{train_size + eval_size} problems requested but {digits}-digit addition has only {space}")
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[Task] = []
    while len(problems) < train_size + eval_size:
        problem = _problem(rng, digits)
        if problem.prompt not in seen:
            seen.add(problem.prompt)
            problems.append(problem)
    return problems[:train_size], problems[train_size:]


@register_env("arithmetic")
class ArithmeticEnv:
    """The quickstart task as an environment: one turn, reward 1 for the exact sum."""

    max_turns, system_prompt, tools, stop = 1, None, (), ()
    step_inline = True  # an exact-match grade: the rollout calls step on its event loop, no worker thread

    def __init__(self, digits: int = 3, time_limit_s: float = 60.0) -> None:
        self.digits, self.time_limit_s = digits, time_limit_s

    def tasks(self, size: int, seed: int) -> list[Task]:
        return make_splits(seed, self.digits, train_size=size, eval_size=0)[0]

    def splits(self, train_size: int, eval_size: int, seed: int) -> tuple[list[Task], list[Task]]:
        """Train and held-out tasks of one seed (the shipped model's warm-up never saw the held-out ones)."""
        return make_splits(seed, self.digits, train_size, eval_size)

    def reset(self, task: Task) -> str:
        self.answer = task.answer
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        return final(exact_match_reward(model_text, self.answer))
