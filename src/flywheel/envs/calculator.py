"""Multi-digit multiplication with a calculator tool: too hard to do in the head of a tiny model, one call with it.

user:      What is 347*582?
model:     <tool_call>{"name": "calculate", "arguments": {"expression": "347*582"}}</tool_call>
tool:      201954
model:     201954                                                              reward 1 (exact)
"""

from __future__ import annotations

import ast
import operator
import random

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env
from flywheel.envs.tools import run_tool_calls, tool
from flywheel.rewards.exact import exact_match_reward

_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
MAX_EXPONENT = 100
MAX_DIGITS = 1000


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression of numbers, + - * / // % ** and parentheses; no names, no calls."""

    def value(node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponents above {MAX_EXPONENT} are not allowed")
            result = _OPERATORS[type(node.op)](left, right)
            if isinstance(result, int) and abs(result) >= 10**MAX_DIGITS:
                raise ValueError(f"results over {MAX_DIGITS} digits are not allowed")
            return result
        raise ValueError(f"only numbers and + - * / // % ** are allowed, not {ast.unparse(node)!r}")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression!r} is not an arithmetic expression") from None
    return value(tree.body)


@tool
def calculate(expression: str) -> str:
    """Evaluates an arithmetic expression and returns its value.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. 347*582
    """
    result = evaluate(expression)
    return str(int(result) if isinstance(result, float) and result.is_integer() else result)


@register_env("calculator")
class CalculatorEnv:
    """``digits``-digit by ``digits``-digit products; the answer alone after using the tool scores 1."""

    tools = (calculate,)
    stop = ("</tool_call>",)  # the model's turn ends with its call; the tool answers

    def __init__(self, digits: int = 3, max_turns: int = 3, time_limit_s: float = 60.0, system_prompt: str | None = None) -> None:
        self.digits, self.max_turns, self.time_limit_s, self.system_prompt = digits, max_turns, time_limit_s, system_prompt

    def tasks(self, size: int, seed: int) -> list[Task]:
        rng = random.Random(seed)
        low, high = 10 ** (self.digits - 1), 10**self.digits - 1
        pairs = [(rng.randint(low, high), rng.randint(low, high)) for _ in range(size)]
        return [Task(f"What is {a}*{b}?", str(a * b)) for a, b in pairs]

    def reset(self, task: Task) -> str:
        self.answer = task.answer
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        results = run_tool_calls(self.tools, model_text)
        if not results:
            return final(exact_match_reward(model_text, self.answer), tool_calls=0, tool_errors=0)
        info = {"tool_calls": len(results), "tool_errors": sum(r.error for r in results)}
        return StepResult([r.content for r in results], None, False, info, role="tool")
