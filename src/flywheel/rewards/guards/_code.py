"""Python code found in a completion, parsed once, with import aliases resolved."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache

from flywheel.rewards.guards.base import PASS, GuardVerdict, flag

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S | re.I)
_CODE_LINE = re.compile(r"^\s*(?:def |class |import |from \S+ import |@|if __name__)", re.M)
_COMMENT = re.compile(r"#[^\n]*")
TEST_PATH = re.compile(r"(?:^|[/\\])(?:test_\w*\.py|\w+_test\.py|conftest\.py|tests?[/\\])")


@dataclass(frozen=True)
class Code:
    """Source and, when it parses, its AST and name -> dotted-module aliases."""

    source: str
    tree: ast.Module | None
    aliases: dict[str, str]

    @property
    def stripped(self) -> str:
        """Source without `#` comments, for the regex fallback of unparsable code."""
        return _COMMENT.sub("", self.source)


@lru_cache(maxsize=512)
def read_code(completion: str) -> Code | None:
    """The ```python fenced blocks, else the whole completion when it parses or looks like code; else None."""
    blocks = _FENCE.findall(completion)
    source = "\n".join(blocks) if blocks else completion
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        if blocks or _CODE_LINE.search(source):
            return Code(source, None, {})
        return None
    return Code(source, tree, _aliases(tree))


def _aliases(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module or ''}.{a.name}".lstrip(".")
    return aliases


def imported_modules(tree: ast.Module) -> set[str]:
    """Every module named by an import statement, with its parent packages."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return {".".join(n.split(".")[: i + 1]) for n in names for i in range(n.count(".") + 1)}


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of `np.linalg.norm`, `getattr(sys, "exit")` or `__import__("os").x`, import aliases resolved."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [const_str(a) for a in node.args]
        if node.func.id == "__import__" and args and args[0]:
            return args[0]
        if node.func.id == "getattr" and len(args) >= 2 and args[1]:
            base = dotted(node.args[0], aliases)
            return f"{base}.{args[1]}" if base else None
    return None


def const_str(node: ast.AST) -> str | None:
    """The value of a string literal, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def calls(code: Code) -> list[tuple[str, ast.Call]]:
    """(resolved callee name, call node) for every call whose callee has a dotted name."""
    assert code.tree is not None
    found = []
    for node in ast.walk(code.tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func, code.aliases)
            if name:
                found.append((name, node))
    return found


def string_args(call: ast.Call) -> list[str]:
    """String literals passed to a call, positionally or by keyword."""
    values = [const_str(a) for a in call.args] + [const_str(k.value) for k in call.keywords]
    return [v for v in values if v is not None]


def is_test_path(path: str, task: dict | None) -> bool:
    """Whether a path names a test file: the task's `test_files`, or test_*.py / *_test.py / conftest.py / tests/."""
    names = (task or {}).get("test_files", [])
    return bool(TEST_PATH.search(path)) or any(path == n or path.endswith(("/" + n, "\\" + n)) for n in names)


def parsed_or_verdict(completion: str, fallback: re.Pattern[str], what: str) -> Code | GuardVerdict:
    """The completion's parsed code, or the verdict when there is no tree to inspect: PASS without code,
    and the regex ``fallback`` (reported as ``what``) when the code does not parse."""
    code = read_code(completion)
    if code is None:
        return PASS
    if code.tree is None:
        m = fallback.search(code.stripped)
        return flag(f"{what} ({m.group(0).strip()})") if m else PASS
    return code
