"""Write a Python function; graded by hidden tests in the sandbox (reward: the pass rate).

Each task picks a problem of ``code_problems.PROBLEMS`` and draws its own hidden cases from the task's
seed (``hidden_cases`` of them; expected values from the problem's reference solution, run here on
the host), plus one example shown in the prompt. The solution is read and run as
``flywheel.rewards.code`` documents (the last python block defining the function, imported as a
module).

With ``max_turns > 1`` a failing attempt gets one line of feedback (how many hidden tests failed,
never which) and another try; the last attempt's pass rate is the reward.
"""

from __future__ import annotations

import random
from typing import Literal

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.code_problems import PROBLEMS, Problem
from flywheel.envs.registry import register_env
from flywheel.rewards.code import hidden_tests_reward, shared_sandbox
from flywheel.sandbox import Sandbox


def make_task(problem: Problem, rng: random.Random, hidden_cases: int) -> Task:
    """A task of ``problem``: the prompt with one worked example, and ``hidden_cases`` cases drawn from ``rng``."""
    (args, value), *cases = problem.cases(rng, hidden_cases + 1)
    example = f"{problem.name}({', '.join(map(repr, args))}) == {value!r}"
    prompt = (
        f"Write a Python function {problem.signature} that {problem.statement}. For example, {example}. Answer with the code in a ```python block."
    )
    return Task(prompt, metadata={"function": problem.name, "cases": cases})


@register_env("python_code")
class PythonCodeEnv:
    #: reward-hacking guards that fit model-written code, on by default (reward.guards overrides)
    guards = ("exit_tricks", "eq_override", "harness_tampering", "visible_test_special_casing", "forbidden_introspection", "dynamic_code")
    tools, stop = (), ()

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        max_turns: int = 1,
        time_limit_s: float = 120.0,
        system_prompt: str | None = None,
        hidden_cases: int = 10,
        sandbox_cgroup: Literal["required", "best-effort"] = "required",
    ) -> None:
        # sandbox_cgroup: 'required' refuses to run where no cgroup can cap an execution's total memory and
        # processes; 'best-effort' accepts per-process rlimits there (a warned, weaker mode)
        self.sandbox = sandbox or shared_sandbox(sandbox_cgroup)
        self.max_turns, self.time_limit_s, self.system_prompt = max_turns, time_limit_s, system_prompt
        self.hidden_cases = hidden_cases

    def tasks(self, size: int, seed: int) -> list[Task]:
        rng = random.Random(seed)
        return [make_task(rng.choice(PROBLEMS), rng, self.hidden_cases) for _ in range(size)]

    def reset(self, task: Task) -> str:
        self.function, self.cases, self.turn = task.metadata["function"], task.metadata["cases"], 0
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        self.turn += 1
        reward, report = hidden_tests_reward(self.sandbox, model_text, self.function, self.cases)
        if reward == 1.0 or self.turn == self.max_turns:
            return final(reward)
        feedback = (
            f"No ```python block that parses and defines {self.function} found."
            if report is None
            else f"{report.total - report.passed} of {report.total} hidden tests failed."
        )
        return StepResult(f"{feedback} Try again.", None, False)
