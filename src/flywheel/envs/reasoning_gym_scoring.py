r"""Strict scoring of reasoning-gym answers: one answer, equal to the reference, full credit or none.

The datasets' own ``score_answer`` is lenient: the base class pays ``len(reference) / len(answer)``
whenever the reference appears inside the answer, so listing candidates (``-75 or -76``, a range of
numbers, ``0123456789``) earns reward, and some overrides pay such lists in full.

``strict_score(answer, reference)``: 1.0 when the answer equals the reference after ``normalise``:
case folded; all whitespace removed (a grid on one line, ``a,b`` and ``a, b`` are alike); ``$``
removed; ``\frac{a}{b}`` (``\dfrac``, ``\tfrac``) written ``a/b``; one trailing period dropped. When
both sides are then numbers (``-1,234.50``: thousands separators allowed), they are compared as
numbers (``42`` == ``42.0``). Else 0.0.

Datasets whose tasks have many valid answers, ``SOLUTION_CHECKED`` (a puzzle's moves, an expression
reaching a target, an antiderivative, a reordered statement), or no single reference at all, are
scored by the dataset's own verifier with full credit only (``score_answer(...) == 1.0``), and an
answer holding the reference plus anything else (the reference among candidates) scores 0.
"""

from __future__ import annotations

import re
from decimal import Decimal

# Checked by their own verifier: many valid answers (or the reference is None).
SOLUTION_CHECKED = frozenset(
    {
        "boxnet",
        "complex_arithmetic",
        "countdown",
        "graph_color",
        "group_anagrams",
        "intermediate_integration",
        "jugs",
        "knight_swap",
        "knights_knaves",
        "n_queens",
        "palindrome_generation",
        "polynomial_equations",
        "polynomial_multiplication",
        "propositional_logic",
        "puzzle24",
        "quantum_lock",
        "rubiks_cube",
        "rush_hour",
        "shortest_path",
        "simple_integration",
        "sokoban",
        "tower_of_hanoi",
        "word_ladder",
    }
)

_SPACE_OR_DOLLAR = re.compile(r"\s+|\$")
_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


def normalise(text: str) -> str:
    """Case folded, without whitespace or ``$``, LaTeX fractions as ``a/b``, without one trailing period."""
    text = _FRAC.sub(r"\1/\2", _SPACE_OR_DOLLAR.sub("", text.casefold()))
    return text.removesuffix(".")


def as_number(text: str) -> Decimal | None:
    """The value of a normalised answer that is one number (thousands separators allowed), else None."""
    return Decimal(text.replace(",", "")) if _NUMBER.fullmatch(text) else None


def strict_score(answer: str, reference: str) -> float:
    """1.0 when ``answer`` equals ``reference`` after ``normalise`` (numbers by value), else 0.0."""
    got, want = normalise(answer), normalise(reference)
    if got == want:
        return 1.0
    got_value, want_value = as_number(got), as_number(want)
    return 1.0 if got_value is not None and got_value == want_value else 0.0


def holds_reference_and_more(answer: str, reference: str) -> bool:
    """Whether the normalised reference appears inside a longer normalised answer (a list of candidates)."""
    got, want = normalise(answer), normalise(reference)
    return want in got and got != want
