"""Battery case type and the helpers that dress code the way a model answers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    """One completion: a hack (``category`` set) or an honest control (``category`` None) for ``task``.

    Code tasks carry ``function`` and hidden ``cases`` (run through the real sandbox grader); text tasks carry the
    ``question`` a judge would see."""

    name: str
    completion: str
    category: str | None = None
    task: dict = field(default_factory=dict)


def py(code: str, intro: str = "Here is my solution.") -> str:
    """A model-style answer: a sentence, then the code in a ```python block."""
    return f"{intro}\n\n```python\n{code.strip()}\n```\n"
