r"""A math completion's final answer, and whether it is a number written in simplest form.

Equivalence alone pays an answer that still needs evaluating: ``\boxed{\frac{3}{4}+\frac{5}{6}}``,
the question restated, is equal to 19/12. Every grader that compares a mathematical answer with a
reference that is a number (the math environment, the dataset ``math`` and ``numeric`` graders)
applies one rule first (``number_form_ok``): the answer must be a number in simplest form too.

Honest notation is read first (``canonical``): spaces, ``$`` (``\$`` too) and ``\(`` ``\)`` ``\[`` ``\]``
delimiters, the LaTeX spacing commands ``\,`` ``\;`` ``\!`` ``\ `` and one trailing period are
removed; a Unicode minus or dash is ``-``; ``\displaystyle``, ``\left``, ``\right`` and font commands
(``\mathbf{..}``, ``\mathrm{..}``, ``\boldsymbol{..}``) are dropped; ``\frac12`` is ``\frac{1}{2}``;
thousands separators (``1,000``, ``1{,}000``) go; a repeating decimal (``0.\overline{3}``,
``0.(3)``, ``0.\dot{3}``) is its fraction in lowest terms; one pair of enclosing parentheses and
a trailing unit in text mode (``18\text{ dollars}``), ``\%`` or a degree sign are dropped.

Accepted forms, after that:

- an integer: ``7``, ``-12``;
- a decimal: ``0.5``, ``-1.25``, ``.5`` (its value is then judged by the equivalence check);
- a single fraction in lowest terms with a denominator of at least 2: ``19/12``, ``\frac{19}{12}``,
  ``\dfrac`` and ``\tfrac`` alike, negative as ``-\frac{1}{2}``, ``\frac{-1}{2}`` or ``-1/2``.

Anything else is refused: sums, products, powers, roots, mixed numbers (``1\frac{7}{12}``),
unreduced fractions (``\frac{38}{24}``, ``4/2``, ``\frac{3}{1}``), a negative denominator, two signs,
``\approx``, words, units outside text mode, several numbers.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NOISE = re.compile(r"\s+|\\?\$|\\[()\[\]]|\\[,;! ]")
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
    """The boxed answer, else the whole completion (a bare ``19/12`` is an answer too), in canonical form."""
    answer = boxed_answer(completion)
    return canonical(completion if answer is None else answer)


_DASHES = str.maketrans(dict.fromkeys("\u2212\u2012\u2013\u2014\u2010\u2011\ufe63\uff0d", "-"))
_STYLE = re.compile(r"\\(?:displaystyle|textstyle|left|right|[bB]igg?[lr]?)(?![a-zA-Z])")
_FONT = re.compile(r"\\(?:mathbf|mathrm|mathit|boldsymbol|bm|textbf)\{([^{}]*)\}")
_BARE_FRAC = re.compile(r"\\([dt]?frac)(\d|\{[^{}]*\})(\d|\{[^{}]*\})")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_REPEATING = re.compile(r"(-?)(\d*)\.(\d*)(?:\\(?:overline|bar|dot)\{(\d+)\}|\\dot(\d)|\((\d+)\))")
_UNIT = re.compile(r"(.*?\d)(?:\\(?:text|mbox|mathrm)\{[^{}\d]*\}|\\?%|\^\{?\\circ\}?|\u00b0)")


def canonical(answer: str) -> str:
    """``answer`` with honest notation read as plain numbers where it is one (module docstring)."""
    text = _NOISE.sub("", answer.translate(_DASHES)).removesuffix(".")
    text = _FONT.sub(r"\1", _STYLE.sub("", text)).replace("{,}", ",")
    text = _BARE_FRAC.sub(lambda m: f"\\{m[1]}{{{m[2].strip('{}')}}}{{{m[3].strip('{}')}}}", text)
    if text.startswith("(") and text.endswith(")") and "(" not in text[1:-1] and ")" not in text[1:-1]:
        text = text[1:-1]
    if m := _UNIT.fullmatch(text):
        text = m[1]
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if m := _REPEATING.fullmatch(text):
        text = _repeating_fraction(m[1], m[2], m[3], m[4] or m[5] or m[6])
    return text


def _repeating_fraction(sign: str, whole: str, fixed: str, period: str) -> str:
    """``sign whole.fixed(period)(period)...`` as ``p/q`` in lowest terms (an integer when q is 1)."""
    value = Fraction(int(whole or 0)) + Fraction(int(fixed + period) - int(fixed or 0), 10 ** len(fixed) * (10 ** len(period) - 1))
    value = -value if sign else value
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def number_form_ok(answer: str, reference: str) -> bool:
    """The one answer-form rule of the graders that compare math answers: when the canonical ``reference`` is
    a number, the canonical ``answer`` must be a number in simplest form; otherwise any form may be compared."""
    return simplest_number(answer) or not simplest_number(canonical(reference))


def simplest_number(answer: str) -> bool:
    """Whether the normalised ``answer`` is an integer, a decimal, or one fraction in lowest terms (module docstring)."""
    if _INTEGER.fullmatch(answer) or _DECIMAL.fullmatch(answer):
        return True
    parts = _fraction_parts(answer)
    if parts is None:
        return False
    sign, inner_sign, num, den = parts
    return not (sign and inner_sign) and den >= 2 and math.gcd(num, den) == 1


def number_value(answer: str) -> float | None:
    """The value of a canonical ``answer`` that is a number in simplest form, else None."""
    exact = number_fraction(answer)
    return None if exact is None else float(exact)


def number_fraction(answer: str) -> Fraction | None:
    """The exact value of a canonical ``answer`` that is a number in simplest form, else None."""
    if not simplest_number(answer):
        return None
    parts = _fraction_parts(answer)
    if parts is None:
        return Fraction(answer)
    sign, inner_sign, num, den = parts
    return Fraction(-num if sign != inner_sign else num, den)


def _fraction_parts(answer: str) -> tuple[bool, bool, int, int] | None:
    """(a sign before it, a sign inside it, numerator, denominator) of one fraction (``a/b`` or ``\\frac{a}{b}``)."""
    m = _FRACTION.fullmatch(answer)
    return None if m is None else (bool(m[1]), bool(m[2] or m[5]), int(m[3] or m[6]), int(m[4] or m[7]))
