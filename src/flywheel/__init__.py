"""flywheel: RL post-training for LLMs on Ray and vLLM. The Python API (``flywheel.api``):
``from flywheel import Config, train, evaluate``; a programmable session: ``from flywheel import Session``.

The names load on first use: importing a submodule (a sandbox or verifier worker imports
``flywheel.rewards...``) does not import the config, torch or the controller."""

from __future__ import annotations

from typing import Any

__all__ = ["Config", "ConfigError", "RunResult", "Session", "evaluate", "train"]


def __getattr__(name: str) -> Any:
    if name in ("Config", "ConfigError"):
        from flywheel import config

        return getattr(config, name)
    if name in ("RunResult", "evaluate", "train"):
        from flywheel import api

        return getattr(api, name)
    if name == "Session":
        from flywheel.session import Session

        return Session
    raise AttributeError(f"module 'flywheel' has no attribute {name!r}")
