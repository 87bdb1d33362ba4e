"""Code rows whose prompt shows their tests (MBPP-style ``assert f(2, 3) == 5`` in the prompt), and the hidden
cases that grade them instead.

A row's case is **shown** when its call, ``function(args)`` with the arguments written as JSON or as Python
literals, appears in the prompt (whitespace, quote style and ``True``/``False``/``None`` aside). Graded only on
shown cases, a function fitted to them (a table of the shown calls, no reasoning) scores 1.0.

**Hidden cases** come from the row's reference solution: inputs mutated from the row's own inputs (ints moved
by small steps with their sign kept, strings with a character dropped, repeated or swapped from their own
alphabet (a one-character string stays one character of its class), lists reordered, shortened or extended with their own elements, bools flipped), never equal to a
given input, and their expectations computed by running the reference solution in the sandbox (it is data
from a file). The reference must reproduce every case the row gives, or the row is refused.
"""

from __future__ import annotations

import json
import random
import re
import string
import zlib
from collections.abc import Sequence
from typing import Any

from flywheel.sandbox import Sandbox
from flywheel.sandbox.core import same_value

Case = tuple[list[Any], Any]
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")
_JSON_LITERALS = {"True": "true", "False": "false", "None": "null"}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _normalized(text: str) -> str:
    text = _PY_LITERALS.sub(lambda m: _JSON_LITERALS[m[1]], text.replace("'", '"'))
    return re.sub(r"\s+", "", text)


def shown_cases(prompt: str, function: str, cases: Sequence[Case]) -> list[bool]:
    """Per case, whether the prompt shows its call (module docstring)."""
    seen = _normalized(prompt)
    return [f"{function}({compact(list(args))[1:-1]})" in seen for args, _ in cases]


def _mutate(value: Any, rng: random.Random) -> Any:
    """A nearby value of the same type (module docstring)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        step = rng.choice([1, 1, 2, 3, rng.randint(4, 20)])
        same_sign = [v for v in (value + step, value - step) if (v > 0, v < 0) == (value > 0, value < 0)]
        return rng.choice(same_sign or [value + step])
    if isinstance(value, float):
        return round(value * rng.choice([0.5, 1.5, 2.0]) + rng.choice([0.0, 1.0]), 6)
    if isinstance(value, str):
        if not value:
            return rng.choice("abcxyz")
        if len(value) == 1:  # a character stays one, of its class
            pool = next((p for p in (string.ascii_lowercase, string.ascii_uppercase, string.digits) if value in p), value)
            return rng.choice(pool)
        i = rng.randrange(len(value))
        edits = [value[:i] + value[i + 1 :], value[:i] + value[i] + value[i:], value[::-1], value + rng.choice(value)]
        if len(value) > 1:
            j = rng.randrange(len(value))
            chars = list(value)
            chars[i], chars[j] = chars[j], chars[i]
            edits.append("".join(chars))
        return rng.choice(edits)
    if isinstance(value, list):
        if not value:
            return value
        out = list(value)
        edit = rng.randrange(5)
        if edit == 0:
            rng.shuffle(out)
        elif edit == 1 and len(out) > 1:
            out.pop(rng.randrange(len(out)))
        elif edit == 2:
            out.insert(rng.randrange(len(out) + 1), rng.choice(value))
        else:
            i = rng.randrange(len(out))
            out[i] = _mutate(out[i], rng)
        if _ordered(value):  # a sorted input stays sorted: the task may require it
            try:
                out.sort()
            except TypeError:
                pass
        return out
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        return {**value, key: _mutate(value[key], rng)}
    return value


def _ordered(values: list[Any]) -> bool:
    """Whether a list of several numbers or strings is in non-decreasing order."""
    try:
        return len(values) > 1 and all(a <= b for a, b in zip(values, values[1:]))
    except TypeError:
        return False


def mutated_inputs(cases: Sequence[Case], count: int, seed: int) -> list[list[Any]]:
    """Up to ``count`` distinct argument lists mutated from the cases' inputs (one or two arguments each), none
    equal to a given input; the same for the same cases and seed."""
    rng = random.Random(seed)
    given = {compact(list(args)) for args, _ in cases}
    out: dict[str, list[Any]] = {}
    for attempt in range(count * 20):
        if len(out) == count or not cases:
            break
        args = list(cases[attempt % len(cases)][0])
        if not args:
            continue
        for i in rng.sample(range(len(args)), min(len(args), rng.choice([1, 1, 2]))):
            args[i] = _mutate(args[i], rng)
        key = compact(args)
        if key not in given and key not in out:
            out[key] = args
    return list(out.values())


_HARNESS = """
import json as _json, sys as _sys
_inputs = _json.loads(_sys.stdin.read())
for _args in _inputs:
    try:
        _line = _json.dumps({{"value": {function}(*_args)}})
    except Exception as _error:
        _line = _json.dumps({{"error": type(_error).__name__}})
    _sys.stdout.write("{marker}" + _line + "\\n")
"""


def reference_values(sandbox: Sandbox, source: str, function: str, inputs: Sequence[list[Any]]) -> list[dict[str, Any] | None]:
    """The reference solution's answer (``{"value": ...}`` or ``{"error": name}``) for each input, run in the sandbox;
    None where no answer came back."""
    marker = f"@{zlib.crc32(source.encode()):08x}@"
    result = sandbox.run(source + "\n" + _HARNESS.format(function=function, marker=marker), stdin=json.dumps(list(inputs)))
    answers = []
    for line in result.stdout.splitlines():
        if line.startswith(marker):
            try:
                answers.append(json.loads(line[len(marker) :]))
            except ValueError:
                answers.append(None)
    return (answers + [None] * len(inputs))[: len(inputs)]


class ReferenceMismatch(ValueError):
    """A row's reference solution does not reproduce one of the row's own cases."""


def hidden_cases(sandbox: Sandbox, source: str, function: str, cases: Sequence[Case], count: int, column: str) -> list[Case]:
    """Cases nobody was shown (module docstring): ``ReferenceMismatch`` when the reference (column ``column``)
    disagrees with a given case, ValueError when no mutated input has an answer."""
    seed = zlib.crc32(compact([function, [list(c) for c in cases]]).encode())
    inputs = mutated_inputs(cases, count, seed)
    answers = reference_values(sandbox, source, function, [list(a) for a, _ in cases] + inputs)
    for (args, expected), answer in zip(cases, answers):
        if answer is None or "value" not in answer or not same_value(answer["value"], expected):
            got = "no answer" if answer is None else answer.get("error") or compact(answer["value"])
            raise ReferenceMismatch(
                f"the reference solution in column '{column}' gives {got} for {function}({compact(list(args))[1:-1]}), where the row's case expects {compact(expected)}"
            )
    found = [(args, answer["value"]) for args, answer in zip(inputs, answers[len(cases) :]) if answer is not None and "value" in answer]
    if not found:
        raise ValueError(f"the reference solution in column '{column}' answered none of {len(inputs)} inputs mutated from the row's cases")
    return found
