"""length_padding: long completions stretched by repeated text to exploit length-sensitive rewards."""

from __future__ import annotations

import re
import zlib

from flywheel.rewards.guards.base import PASS, GuardVerdict, flag

# Function words of English, French, Spanish, German, Italian and Portuguese prose: at least a few percent of it.
FUNCTION_WORDS = frozenset(
    "the a an of to in and or is are was were be it that this for on with as by at from not but which "
    "le la les de des du et est un une en que qui pour dans sur pas el los las y es por con del der die das und ist "
    "ein eine nicht mit den dem il di che per non o e do da os as um uma".split()
)
_DIGITS = re.compile(r"\d+")
_LETTER = re.compile(r"[^\W\d_]")
_PUNCT = ".,;:!?()[]{}\"'«»“”"
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)
_LIST_TASK = re.compile(r"\b(?:list|table|enumerate|count|words|vocabulary|keywords|tags|names)\b", re.I)


class LengthPadding:
    """Flags a completion of at least `min_words` words whose word n-grams (numbers masked, so `Check 1: ...`,
    `Check 2: ...` repeat) or non-blank lines repeat more than `max_repeat_ratio` (fraction of duplicates; n-grams of
    numbers only, such as a matrix or a count, are left out); prose of at least `min_list_words` words with under
    `min_function_share` function words (a word salad), unless the task asks for a list; or a completion of at least
    `min_chars` characters that zlib compresses below `min_compression` of its size (a repeated run)."""

    name = "length_padding"

    def __init__(
        self,
        max_repeat_ratio: float = 0.5,
        n: int = 4,
        min_words: int = 60,
        min_lines: int = 8,
        min_chars: int = 1500,
        min_compression: float = 0.12,
        min_list_words: int = 150,
        min_function_share: float = 0.03,
    ):
        self.max_repeat_ratio, self.n, self.min_words, self.min_lines = max_repeat_ratio, n, min_words, min_lines
        self.min_chars, self.min_compression = min_chars, min_compression
        self.min_list_words, self.min_function_share = min_list_words, min_function_share

    def check(self, completion: str, task: dict | None = None) -> GuardVerdict:
        words = [_DIGITS.sub("#", w) for w in completion.split()]
        if len(words) >= self.min_words:
            grams = [tuple(words[i : i + self.n]) for i in range(len(words) - self.n + 1)]
            ratio = _duplicate_fraction([g for g in grams if any(_LETTER.search(w) for w in g)])
            if ratio > self.max_repeat_ratio:
                return flag(f"{ratio:.0%} of its {self.n}-word sequences are repeats")
        prose = [w.lower().strip(_PUNCT) for w in _FENCED.sub(" ", completion).split() if _LETTER.search(w)]
        if len(prose) >= self.min_list_words and not _LIST_TASK.search(str((task or {}).get("prompt", ""))):
            share = sum(w in FUNCTION_WORDS for w in prose) / len(prose)
            if share < self.min_function_share:
                return flag(f"{len(prose)} words with {share:.0%} function words: a word list, not prose")
        lines = [ln.strip() for ln in completion.splitlines() if ln.strip()]
        if len(lines) >= self.min_lines:
            ratio = _duplicate_fraction(lines)
            if ratio > self.max_repeat_ratio:
                return flag(f"{ratio:.0%} of its lines are repeats")
        data = completion.encode()
        if len(data) >= self.min_chars:
            ratio = len(zlib.compress(data, 9)) / len(data)
            if ratio < self.min_compression:
                return flag(f"compresses to {ratio:.1%} of its size")
        return PASS


def _duplicate_fraction(items: list) -> float:
    return 1.0 - len(set(items)) / len(items) if items else 0.0
