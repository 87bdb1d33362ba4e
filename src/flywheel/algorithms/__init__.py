"""Algorithms by name: each file holds one algorithm's group rules, advantages and loss, registered with
``@register_algorithm``; the built-ins' settings are declared in config/algorithms.py, an algorithm of the
user's own declares its settings in its module (``algorithm.imports``)."""

from __future__ import annotations

import importlib

from flywheel.algorithms import cispo, dapo, distill, dr_grpo, grpo, gspo, ppo, reinforce_pp, rloo  # noqa: F401  (they register)
from flywheel.algorithms.base import ALGORITHMS, Algorithm, register_algorithm
from flywheel.config.algorithms import AlgorithmConfig

__all__ = ["ALGORITHMS", "Algorithm", "make_algorithm", "register_algorithm"]


def make_algorithm(config: AlgorithmConfig) -> Algorithm:
    """The algorithm ``config.name`` names, after importing ``config.imports`` (in an actor too)."""
    for module in config.imports:
        importlib.import_module(module)
    return ALGORITHMS[config.name](config)
