"""The guard contract: a named check of one completion that returns a verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class GuardVerdict:
    """Outcome of one guard on one completion; `reason` says why when flagged."""

    flagged: bool
    reason: str = ""


PASS = GuardVerdict(False)


def flag(reason: str) -> GuardVerdict:
    """A flagged verdict with its reason."""
    return GuardVerdict(True, reason)


class Guard(Protocol):
    """A reward-hacking detector."""

    name: str

    def check(self, completion: str, task: dict | None = None) -> GuardVerdict: ...
