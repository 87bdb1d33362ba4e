r"""The answer in a model's final message (or in a dataset's reference), by one of five rules.

    boxed        the content of the last \boxed{...} (braces balanced)
    tag          the content of the last <tag>...</tag> (tag configurable, e.g. answer)
    last_number  the last number written, thousands separators removed ("1,250" -> "1250")
    gsm8k        the first number after the last "####" (GSM8K's final line: "#### 240 (10 h x $24/h)" is 240),
                 thousands separators removed; the line's text when it has no number
    whole        the whole text

Each result is stripped of surrounding whitespace; None when the rule finds nothing (an empty
text under ``whole`` too), which graders score 0.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from flywheel.rewards.answer_form import boxed_answer
from flywheel.rewards.verifiers import last_number_text

Extraction = Literal["boxed", "tag", "last_number", "gsm8k", "whole"]
EXTRACTIONS: tuple[str, ...] = ("boxed", "tag", "last_number", "gsm8k", "whole")
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")


@lru_cache(maxsize=16)
def _tag_pattern(tag: str) -> re.Pattern:
    return re.compile(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", re.DOTALL)


def extract_answer(text: str, rule: Extraction, tag: str = "answer") -> str | None:
    """The answer ``rule`` finds in ``text`` (module docstring), stripped; None when there is none."""
    if rule == "boxed":
        found = boxed_answer(text)
    elif rule == "tag":
        matches = _tag_pattern(tag).findall(text)
        found = matches[-1] if matches else None
    elif rule == "last_number":
        found = last_number_text(text)
    elif rule == "gsm8k":
        matches = _GSM8K.findall(text)
        found = gsm8k_number(matches[-1]) if matches else None
    elif rule == "whole":
        found = text
    else:
        raise ValueError(f"unknown answer extraction {rule!r}: use one of {', '.join(EXTRACTIONS)}")
    found = None if found is None else found.strip()
    return found or None


_LEADING = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def gsm8k_number(line: str) -> str:
    """The first number of a "####" line (a fraction whole), thousands separators removed; else the line."""
    m = _LEADING.search(line)
    return line if m is None else m[0].replace(",", "")
