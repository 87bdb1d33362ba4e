"""Which answers may reach a reasoning-gym verifier that evaluates them as Python on this host.

Some datasets' ``score_answer`` runs the model's answer through ``eval`` (directly, or through
sympy's ``parse_expr``, which calls ``eval``): an answer such as
``__import__('os').system(...) or 1`` would run in the trainer's process (checked: countdown's
verifier creates a file given such an answer). Every answer to those datasets passes ``may_evaluate``
first; one that fails scores 0, in strict and lenient scoring alike.

- ``EXPRESSION_DATASETS`` (the answer is an arithmetic or symbolic expression, parsed by sympy):
  ASCII letters, digits, spaces and ``+ - * / ^ ( ) , .`` only, every name a single letter or a
  function of ``MATH_NAMES``, no attribute access. Calls are then sympy's math functions only.
- ``FALLBACK_EVAL_DATASETS`` (a grid or a string, ``eval``-ed only when it does not match as text):
  no ``(`` and no ``:=``, so no function can be called and nothing assigned.
"""

from __future__ import annotations

import re

EXPRESSION_DATASETS = frozenset(
    {
        "countdown",
        "intermediate_integration",
        "polynomial_multiplication",
        "puzzle24",
        "simple_integration",
    }
)
FALLBACK_EVAL_DATASETS = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})
MATH_NAMES = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "exp",
        "log",
        "ln",
        "sqrt",
        "pi",
        "Abs",
    }
)

_EXPRESSION_CHARS = re.compile(r"[A-Za-z0-9\s+\-*/^(),.]*")
_NAME = re.compile(r"[A-Za-z]+")
_ATTRIBUTE = re.compile(r"\.\s*[A-Za-z]")


def may_evaluate(dataset: str, answer: str) -> bool:
    """Whether ``answer`` may be given to ``dataset``'s verifier (always, for datasets that do not ``eval`` it)."""
    if dataset in EXPRESSION_DATASETS:
        return (
            _EXPRESSION_CHARS.fullmatch(answer) is not None
            and not _ATTRIBUTE.search(answer)
            and all(len(n) == 1 or n in MATH_NAMES for n in _NAME.findall(answer))
        )
    if dataset in FALLBACK_EVAL_DATASETS:
        return "(" not in answer and ":=" not in answer
    return True
