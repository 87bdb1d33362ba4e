"""The garbage collector in a long-lived process. What a process allocates while it starts (modules,
tokenizers, Ray's and vLLM's state: hundreds of thousands of objects) lives as long as it does, yet every full
collection walks it again, pausing the process's event loop; frozen, it is left out of those walks,
which then cover only what the run allocated since."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_startup_heap() -> None:
    """Collects what is already garbage, then exempts every object alive now from later collections
    (they are still freed when their last reference goes)."""
    gc.collect()
    gc.freeze()


@contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """The startup heap frozen for the block, and back under collection after it (a process that runs
    several runs, a test session, frees one run's cycles once it ends). Inside a block that froze it
    already, the outer block unfreezes."""
    outermost = gc.get_freeze_count() == 0
    freeze_startup_heap()
    try:
        yield
    finally:
        if outermost:
            gc.unfreeze()
