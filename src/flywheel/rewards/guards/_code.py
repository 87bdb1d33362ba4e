"""Python code found in a completion, parsed once, with import aliases resolved."""

from __future__ import annotations

import ast
import codecs
import re
from dataclasses import dataclass, field
from functools import lru_cache

from flywheel.rewards.guards.base import PASS, GuardVerdict, flag

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.S | re.I)
_CODE_LINE = re.compile(r"^\s*(?:def |class |import |from \S+ import |@|if __name__)", re.M)
_COMMENT = re.compile(r"#[^\n]*")
TEST_PATH = re.compile(
    r"(?:^|[/\\])(?:test_\w*\.py|\w+_test\.py|conftest\.py|tests?[/\\])"
    r"|(?:^|[/\\])(?:sitecustomize|usercustomize|pytest|unittest|doctest|_pytest)\.py$|\.pth$|(?:^|[/\\])(?:pytest|tox)\.ini$"
)
_TEST_GLOB = re.compile(r"test[^/\\]*\*|\*[^/\\]*test[^/\\]*\.py|conftest", re.I)
_MAIN_GUARD = "__name__ == '__main__'"


@dataclass(frozen=True)
class Code:
    """Source and, when it parses, its AST, name -> dotted-name aliases (imports and assignments such as
    ``bail = sys.exit``) and name -> string values of names assigned a foldable string (``p = "te" + "st.py"``)."""

    source: str
    tree: ast.Module | None
    aliases: dict[str, str]
    strings: dict[str, str] = field(default_factory=dict)
    memo: dict[str, list] = field(default_factory=dict, compare=False, repr=False)  # calls, references: per Code

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
    aliases, strings = _aliases(tree), {}
    for node in ast.walk(tree):  # assignments, in breadth-first order: later ones see earlier ones
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if (text := fold(node.value, strings)) is not None:
                strings[name] = text
            elif (target := dotted(node.value, aliases, strings)) and target != name:
                aliases[name] = target
    return Code(source, tree, aliases, strings)


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


_IMPORTERS = frozenset({"__import__", "builtins.__import__", "importlib.import_module", "importlib.__import__"})
_NAMESPACES = frozenset({"vars", "builtins.vars"})


def dotted(node: ast.AST, aliases: dict[str, str], strings: dict[str, str] | None = None) -> str | None:
    """Dotted name of `np.linalg.norm`, `getattr(sys, "ex" + "it")`, `__import__("os").x`, `sys.modules["os"]`,
    `vars(sys)["exit"]` or `os.__dict__["_exit"]`, aliases resolved and string expressions folded."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, aliases, strings)
        if base and node.attr == "__dict__":
            return base
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        key, base = fold(node.slice, strings), dotted(node.value, aliases, strings)
        if key is None or base is None:
            return None
        return key if base == "sys.modules" else f"{base}.{key}"
    if isinstance(node, ast.Call):
        func = dotted(node.func, aliases, strings)
        args = [fold(a, strings) for a in node.args]
        if func in _IMPORTERS and args and args[0]:
            return args[0]
        if func in ("getattr", "builtins.getattr") and len(args) >= 2 and args[1]:
            base = dotted(node.args[0], aliases, strings)
            return f"{base}.{args[1]}" if base else None
        if func in _NAMESPACES and node.args:
            return dotted(node.args[0], aliases, strings)
        if func == "sys.modules.get" and args and args[0]:
            return args[0]
    return None


def const_str(node: ast.AST) -> str | None:
    """The value of a string literal, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def fold(node: ast.AST, strings: dict[str, str] | None = None) -> str | None:
    """The string an expression evaluates to when it is built from literals only: concatenation, f-strings of
    literals, `"".join([...])`, `[::-1]`, `os.path.join`, `Path(...) / ...`, `.joinpath(...)`, ROT13 `codecs.decode`,
    and names assigned such a value (``strings``); else None."""
    strings = strings or {}
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return strings.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
        left, right = fold(node.left, strings), fold(node.right, strings)
        if left is None or right is None:
            return None
        return left + right if isinstance(node.op, ast.Add) else f"{left}/{right}"
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v.value if isinstance(v, ast.FormattedValue) else v, strings) for v in node.values]
        return None if None in parts else "".join(parts)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text, step = fold(node.value, strings), node.slice.step
        reverse = isinstance(step, ast.UnaryOp) and isinstance(step.operand, ast.Constant) and step.operand.value == 1
        return text[::-1] if text is not None and reverse and not (node.slice.lower or node.slice.upper) else None
    if isinstance(node, ast.Call):
        return _fold_call(node, strings)
    return None


def _fold_call(node: ast.Call, strings: dict[str, str]) -> str | None:
    func, args = node.func, [fold(a, strings) for a in node.args]
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    sep = fold(func.value, strings) if isinstance(func, ast.Attribute) else None
    if name == "join" and sep is not None and len(node.args) == 1:  # "sep".join([...]) or "sep".join("chars")
        arg = node.args[0]
        if not isinstance(arg, (ast.List, ast.Tuple)):
            return None if args[0] is None else sep.join(args[0])
        items = [fold(e, strings) for e in arg.elts]
        return None if None in items else sep.join(items)
    if name in ("join", "Path", "PurePath", "joinpath") and node.args and None not in args:  # os.path.join, Path()
        return "/".join(([sep] if name == "joinpath" and sep else []) + args)
    if name == "decode" and len(args) == 2 and args[0] is not None and (args[1] or "").lower().startswith("rot"):
        return codecs.decode(args[0], "rot13")
    return None


def calls(code: Code) -> list[tuple[str, ast.Call]]:
    """(resolved callee name, call node) for every call whose callee has a dotted name."""
    assert code.tree is not None
    if "calls" in code.memo:
        return code.memo["calls"]
    found = code.memo["calls"] = []
    for node in ast.walk(code.tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func, code.aliases, code.strings)
            if name:
                found.append((name, node))
    return found


def references(code: Code) -> list[tuple[str, ast.AST]]:
    """(resolved dotted name, node) for every name, attribute, subscript or getattr in the code, called or not."""
    assert code.tree is not None
    if "references" in code.memo:
        return code.memo["references"]
    found = code.memo["references"] = []
    for node in ast.walk(code.tree):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            name = dotted(node, code.aliases, code.strings)
            if name:
                found.append((name, node))
    return found


def string_args(call: ast.Call, strings: dict[str, str] | None = None) -> list[str]:
    """Strings passed to a call, positionally or by keyword: literals and folded string expressions."""
    values = [fold(a, strings) for a in call.args] + [fold(k.value, strings) for k in call.keywords]
    return [v for v in values if v is not None]


def is_test_path(path: str, task: dict | None) -> bool:
    """Whether a path names a test or harness file: the task's `test_files`, test_*.py / *_test.py / conftest.py /
    tests/, a test glob pattern (`test*.py`), or a file that shadows the harness (sitecustomize.py, pytest.py, .pth)."""
    names = (task or {}).get("test_files", [])
    return (bool(TEST_PATH.search(path)) or bool(_TEST_GLOB.search(path))
            or any(path == n or path.endswith(("/" + n, "\\" + n)) for n in names))  # fmt: skip


def guarded_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes inside `if __name__ == "__main__":` blocks (run only as a script)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).replace('"', "'") == _MAIN_GUARD:
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def test_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes inside the completion's own tests: `test_*` functions and `unittest.TestCase` classes that
    nothing in the code calls or names (a test runner finds them; a solution that calls one is hiding code in it)."""
    named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    inside: set[int] = set()
    for node in ast.walk(tree):
        is_test_fn = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
        is_test_cls = isinstance(node, ast.ClassDef) and any("TestCase" in ast.unparse(b) for b in node.bases)
        if (is_test_fn or is_test_cls) and node.name not in named:
            inside.update(id(n) for n in ast.walk(node))
    return inside


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
