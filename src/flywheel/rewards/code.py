"""Reward for model-written code: the pass rate of hidden tests run in the sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flywheel.rewards.guards._code import read_code
from flywheel.sandbox import Sandbox, TestReport


def hidden_tests_reward(
    sandbox: Sandbox, completion: str, function_name: str, cases: Sequence[tuple[Sequence[Any], Any]]
) -> tuple[float, TestReport | None]:
    """Fraction of ``cases`` (args, expected) that ``function_name`` from the completion's code passes.

    The code is the completion's ```python blocks (or the whole completion when it is code); the
    verdicts come from the host's comparison, never from the child (``Sandbox.run_tests``). A
    completion without code scores 0 with no report.
    """
    code = read_code(completion)
    if code is None:
        return 0.0, None
    report = sandbox.run_tests(code.source, function_name, cases)
    return report.pass_rate, report
