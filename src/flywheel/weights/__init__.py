"""Weight transports from trainer to engines behind one seam, ``base.WeightTransport``; ``weights.config`` selects one by name."""

from __future__ import annotations

from importlib import import_module

from flywheel.weights.base import WeightTransport
from flywheel.weights.config import TransportConfig


def open_transport(config: TransportConfig, engines: int) -> WeightTransport:
    """The trainer side of the configured transport, publishing to ``engines`` engine replicas."""
    module, _, name = config.implementation.partition(":")
    return getattr(import_module(module), name).from_config(config, engines)
