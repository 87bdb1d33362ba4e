"""Environments by name: ``@register_env("name")`` on a class, ``make_env("name", **kwargs)`` for an instance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flywheel.envs.base import Environment

_REGISTRY: dict[str, Callable[..., Environment]] = {}
# verifiers_env imports the verifiers package only when such an environment is made
_BUILTIN_MODULES = ("arithmetic", "calculator", "python_code", "math_env", "reasoning_gym_env", "dataset", "verifiers_env")

_builtins_loaded = False  # set once every module of _BUILTIN_MODULES has been imported

T = TypeVar("T", bound=Callable[..., Environment])


def register_env(name: str) -> Callable[[T], T]:
    """Class decorator: makes ``make_env(name, ...)`` build it; a name is registered once."""

    def register(factory: T) -> T:
        if _REGISTRY.get(name, factory) is not factory:
            raise ValueError(f"environment {name!r} is already registered (by {_REGISTRY[name].__qualname__})")
        _REGISTRY[name] = factory
        return factory

    return register


def known_envs() -> list[str]:
    """Registered names, built-in environments included."""
    _load_builtins()
    return sorted(_REGISTRY)


def env_factory(name: str) -> Callable[..., Environment]:
    """The class (or factory) registered as ``name``, not instantiated."""
    _load_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown environment {name!r} (known environments: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]


def make_env(name: str, **kwargs: Any) -> Environment:
    """A new instance of the environment registered as ``name``."""
    return env_factory(name)(**kwargs)


def _load_builtins() -> None:
    """Imports the built-in environments' modules (which register them) once per process: the
    rollout makes an environment per episode. Environments registered later land in ``_REGISTRY``
    directly; a failed import is retried by the next call."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(f"flywheel.envs.{module}")
    _builtins_loaded = True
