"""glibc's malloc set up for a CPU training process.

By default glibc serves every allocation above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and returns it to the kernel on free, so each step of a CPU trainer faults in the pages of
its large activations, gradients and casts anew: about 97,000 minor page faults per step of the 30M
bench model, at 0.75x the tokens/s (bench/trainer.md). Serving everything from the heap and keeping
what is freed there makes the next step reuse the same pages. The resident size stays at the step's
peak between steps, as a caching allocator's does.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_MAX = -4
KEEP_FREE_BYTES = 1 << 30  # free memory at the top of the heap beyond this goes back to the kernel


def reuse_freed_memory() -> bool:
    """Makes this process's malloc serve large blocks from the heap and keep freed ones for reuse.
    Returns whether it applied (False where the C library is not glibc)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_FREE_BYTES))
