r"""A math completion's final answer, and whether it is a number written in simplest form.

Equivalence alone pays an answer that still needs evaluating: ``\boxed{\frac{3}{4}+\frac{5}{6}}``,
the question restated, is equal to 19/12. A task that asks for "the simplified answer" checks the
form first (``simplest_number``), then equivalence.

Accepted forms, after removing spaces, ``$`` and ``\(`` ``\)`` ``\[`` ``\]`` delimiters, the LaTeX
spacing commands ``\,`` ``\;`` ``\!`` ``\ `` and one trailing period:

- an integer: ``7``, ``-12``;
- a decimal: ``0.5``, ``-1.25``, ``.5`` (its value is then judged by the equivalence check);
- a single fraction in lowest terms with a denominator of at least 2: ``19/12``, ``\frac{19}{12}``,
  ``\dfrac`` and ``\tfrac`` alike, negative as ``-\frac{1}{2}``, ``\frac{-1}{2}`` or ``-1/2``.

Anything else is refused: sums, products, powers, roots, mixed numbers (``1\frac{7}{12}``),
unreduced fractions (``\frac{38}{24}``, ``4/2``, ``\frac{3}{1}``), a negative denominator, two signs,
``\approx``, words, units, several numbers.
"""

from __future__ import annotations

import math
import re

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NOISE = re.compile(r"\s+|\$|\\[()\[\]]|\\[,;! ]")
_INTEGER = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?(?:\d+\.\d+|\.\d+)")
_FRACTION = re.compile(r"(-?)(?:\\[dt]?frac\{(-?)(\d+)\}\{(\d+)\}|(-?)(\d+)/(\d+))")


def boxed_answer(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{...}``), braces balanced; None without one."""
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    depth, start = 1, starts[-1]
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return None  # the last box is never closed


def final_answer(completion: str) -> str:
    """The boxed answer, else the whole completion (a bare ``19/12`` is an answer too), normalised."""
    answer = boxed_answer(completion)
    return _NOISE.sub("", completion if answer is None else answer).removesuffix(".")


def simplest_number(answer: str) -> bool:
    """Whether the normalised ``answer`` is an integer, a decimal, or one fraction in lowest terms (module docstring)."""
    if _INTEGER.fullmatch(answer) or _DECIMAL.fullmatch(answer):
        return True
    m = _FRACTION.fullmatch(answer)
    if m is None:
        return False
    sign, inner_sign, num, den = m[1], m[2] or m[5], m[3] or m[6], m[4] or m[7]
    return not (sign and inner_sign) and int(den) >= 2 and math.gcd(int(num), int(den)) == 1
