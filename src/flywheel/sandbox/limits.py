"""Per-execution resource limits, applied with setrlimit in the child before candidate code runs (standard library only)."""

from __future__ import annotations

import math
import resource
from typing import Any

_MIB = 1 << 20


def apply(limits: dict[str, Any]) -> None:
    """Set soft = hard limits (hard CPU one second above soft: SIGXCPU first, then SIGKILL).

    ``limits`` keys: cpu_seconds, memory_mb (address space), processes (RLIMIT_NPROC, counted per user; in the
    jail that is the zygote's user namespace), file_size_mb, open_files. Core dumps are disabled.
    """
    cpu = max(1, math.ceil(limits["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    for rlimit, value in (
        (resource.RLIMIT_AS, int(limits["memory_mb"]) * _MIB),
        (resource.RLIMIT_NPROC, int(limits["processes"])),
        (resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * _MIB),
        (resource.RLIMIT_NOFILE, int(limits["open_files"])),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(rlimit, (value, value))
