"""format_tag_abuse: repeated or nested format tags and several boxed answers."""

from __future__ import annotations

import re
from collections.abc import Mapping

from flywheel.rewards.guards.base import PASS, GuardVerdict, flag

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


class FormatTagAbuse:
    """Flags a tag opened more often than allowed (default once each for answer/think/tool_call), a tag opened
    inside itself, and more than one \\boxed{}. `max_counts` raises a tag's limit (e.g. several tool calls)."""

    name = "format_tag_abuse"

    def __init__(self, tags: tuple[str, ...] = ("answer", "think", "tool_call"), max_counts: Mapping[str, int] | None = None):
        self.limits = {t: (max_counts or {}).get(t, 1) for t in tags}

    def check(self, completion: str, task: dict | None = None) -> GuardVerdict:
        for tag, limit in self.limits.items():
            events = re.findall(rf"<\s*(/?)\s*{re.escape(tag)}\b[^>]*>", completion, re.I)
            opened = events.count("")
            if opened > limit:
                return flag(f"<{tag}> opened {opened} times (limit {limit})")
            depth = 0
            for closing in events:
                depth = max(depth - 1, 0) if closing else depth + 1
                if depth > 1:
                    return flag(f"<{tag}> nested inside <{tag}>")
        boxed = len(_BOXED.findall(completion))
        return flag(f"{boxed} \\boxed{{}} answers") if boxed > 1 else PASS
