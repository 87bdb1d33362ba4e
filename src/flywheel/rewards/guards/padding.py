"""length_padding: long completions stretched by repeated text to exploit length-sensitive rewards."""

from __future__ import annotations

import zlib

from flywheel.rewards.guards.base import PASS, GuardVerdict, flag


class LengthPadding:
    """Flags a completion of at least `min_words` words whose word n-grams or non-blank lines repeat more than
    `max_repeat_ratio` (fraction of duplicates), or one of at least `min_chars` characters that zlib compresses
    below `min_compression` of its size (one long repeated token or character run)."""

    name = "length_padding"

    def __init__(self, max_repeat_ratio: float = 0.5, n: int = 4, min_words: int = 60, min_lines: int = 8,
                 min_chars: int = 1500, min_compression: float = 0.12):
        self.max_repeat_ratio, self.n, self.min_words, self.min_lines = max_repeat_ratio, n, min_words, min_lines
        self.min_chars, self.min_compression = min_chars, min_compression

    def check(self, completion: str, task: dict | None = None) -> GuardVerdict:
        words = completion.split()
        if len(words) >= self.min_words:
            grams = [tuple(words[i : i + self.n]) for i in range(len(words) - self.n + 1)]
            ratio = _duplicate_fraction(grams)
            if ratio > self.max_repeat_ratio:
                return flag(f"{ratio:.0%} of its {self.n}-word sequences are repeats")
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
