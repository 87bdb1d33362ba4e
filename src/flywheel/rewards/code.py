"""Reward for model-written code: the pass rate of hidden tests run in the sandbox.

Which code is the solution (``solution_source``): the last fenced block tagged ``python``, ``py``,
``python3`` or untagged (a missing closing fence counts as closed at the end) that parses and binds the
requested function's name at module level (``def``, assignment, import); without any fenced block, the
whole completion under the same test. One block alone, never blocks joined: a solution followed by a
``>>>`` example (which never parses), a usage block or a shell command is the solution, and the last
of several attempts is the one graded.

How it runs (``module_program``): as an imported module named ``solution``, not as ``__main__``, so an
honest ``if __name__ == "__main__":`` block (``unittest.main()``, ``sys.exit(main())``, an ``input()``
demo, an argument parser) is never run; with ``sys.argv == [""]`` (no arguments, as in an interactive
interpreter) and an empty stdin. Whatever the module runs at import time still runs, as an import
would run it; the verdicts come from the host's comparison, never from the child (``Sandbox.run_tests``).
"""

from __future__ import annotations

import ast
import atexit
import textwrap
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from flywheel.sandbox import Sandbox, TestReport

_PYTHON_TAGS = ("", "python", "py", "python3")


@cache
def shared_sandbox(cgroup: str = "required") -> Sandbox:
    """One sandbox pool per process (and cgroup mode), started on first use and closed at exit."""
    sandbox = Sandbox(workers=2, cpu_seconds=5, memory_mb=512, wall_timeout_s=10, cgroup=cgroup)
    sandbox.start()
    atexit.register(sandbox.close)
    return sandbox


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, dedented body) of every ``` fenced block, in order; an unclosed last block runs to the end."""
    blocks: list[tuple[str, str]] = []
    lines, tag = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if tag is None and stripped.startswith("```"):
            tag, lines = stripped[3:].strip().lower(), []
        elif tag is not None and stripped == "```":
            blocks.append((tag, textwrap.dedent("\n".join(lines) + "\n")))
            tag = None
        elif tag is not None:
            lines.append(line)
    if tag is not None:
        blocks.append((tag, textwrap.dedent("\n".join(lines) + "\n")))
    return blocks


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level: the body, and the bodies of its if/try/with/for/while, not of defs."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def binds(tree: ast.Module, name: str) -> bool:
    """Whether the module binds ``name`` at module level: a def or class, an assignment, or an import."""
    for node in _module_statements(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        imports = node.names if isinstance(node, (ast.Import, ast.ImportFrom)) else []
        if any((a.asname or a.name.split(".")[0]) == name for a in imports):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return True
    return False


def _defines(source: str, name: str) -> bool:
    try:
        return binds(ast.parse(source), name)
    except (SyntaxError, ValueError):
        return False


def solution_source(completion: str, function_name: str) -> str | None:
    """The solution's code by the rule in the module docstring, or None when no candidate qualifies."""
    blocks = fenced_blocks(completion)
    candidates = [body for tag, body in blocks if tag in _PYTHON_TAGS] if blocks else [completion]
    return next((c for c in reversed(candidates) if _defines(c, function_name)), None)


def module_program(source: str, function_name: str) -> str:
    """A program that imports ``source`` as the module ``solution`` and exposes its ``function_name`` to the harness."""
    return (
        "def _load(source, name):\n"
        "    import io, sys, types\n"
        "    sys.argv, sys.stdin = [''], io.StringIO('')\n"
        "    module = sys.modules['solution'] = types.ModuleType('solution')\n"
        "    exec(compile(source, 'solution.py', 'exec'), module.__dict__)\n"
        "    return getattr(module, name)\n"
        f"globals()[{function_name!r}] = _load({source!r}, {function_name!r})\n"
        "del _load\n"
    )


def hidden_tests_reward(
    sandbox: Sandbox, completion: str, function_name: str, cases: Sequence[tuple[Sequence[Any], Any]]
) -> tuple[float, TestReport | None]:
    """Fraction of ``cases`` (args, expected) that the completion's ``function_name`` passes.

    A completion without a solution (see ``solution_source``) scores 0 with no report.
    """
    source = solution_source(completion, function_name)
    if source is None:
        return 0.0, None
    report = sandbox.run_tests(module_program(source, function_name), function_name, cases)
    return report.pass_rate, report
