"""Inference engines behind one seam, ``base.Engine``; ``config.engine`` selects one by name."""

from __future__ import annotations

from importlib import import_module

from flywheel.config.engine import EngineConfig


def engine_class(config: EngineConfig) -> type:
    """The class implementing the configured engine (imported now: only that engine's library loads)."""
    module, _, name = config.implementation.partition(":")
    return getattr(import_module(module), name)
