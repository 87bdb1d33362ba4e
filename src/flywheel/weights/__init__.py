"""Weight transports from trainer to engines behind one seam, ``base.WeightTransport``; ``config.weights`` selects one by name."""

from __future__ import annotations

from importlib import import_module

from flywheel.config.weights import TransportConfig
from flywheel.weights.base import WeightTransport


def open_transport(config: TransportConfig, engines: int) -> WeightTransport:
    """The trainer side of the configured transport, publishing to ``engines`` engine replicas."""
    module, _, name = config.implementation.partition(":")
    return getattr(import_module(module), name).from_config(config, engines)
