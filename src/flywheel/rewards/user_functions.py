"""A user's function named in config: ``package.module:function`` (importable) or ``path/to/file.py:function``."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path

# Module-level code runs once, with the module already in sys.modules: without this lock, a second thread loading
# the same file meanwhile finds it half executed and reports its function missing.
_LOADING = threading.RLock()


@cache
def load_function(spec: str) -> Callable:
    """The callable ``spec`` names; ValueError with one sentence when it cannot be loaded."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"{spec!r} is not of the form 'module:function' or 'path/to/file.py:function'")
    try:
        module = _module_from_file(Path(where)) if where.endswith(".py") else importlib.import_module(where)
    except (ImportError, FileNotFoundError, SyntaxError) as error:
        raise ValueError(f"cannot import {where!r} for {spec!r} ({type(error).__name__}: {error})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{where!r} has no function {name!r} (for {spec!r})")
    return fn


def _module_from_file(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"no file {path}")
    module_name = "flywheel_user_" + re.sub(r"\W", "_", path.resolve().as_posix().removesuffix(".py"))
    with _LOADING:
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
