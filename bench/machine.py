"""The machine a bench row was measured on: cores, CPU model, memory and the widest matrix instructions
(the same code's numbers differ between AVX2, AVX-512 and AMX CPUs)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpuinfo(key: str) -> str:
    """The first value of ``key`` in /proc/cpuinfo ("" if absent)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.split(":", 1)[0].strip() == key:
            return line.split(":", 1)[1].strip()
    return ""


def matrix_instructions(flags: set[str]) -> str:
    """The widest of AMX, AVX-512 (with or without bf16) and AVX2 the CPU has."""
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512f" in flags:
        return "AVX-512 with bf16" if "avx512_bf16" in flags else "AVX-512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "cpu": cpuinfo("model name") or platform.processor() or "unknown",
        "instructions": matrix_instructions(set(cpuinfo("flags").split())),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def describe(m: dict) -> str:
    """'2-core AMD EPYC, AVX-512 with bf16 (23.5 GiB)'; what an older row did not record is left out."""
    isa = f", {m['instructions']}" if m.get("instructions") else ""
    memory = f" ({m['memory_gib']} GiB)" if m.get("memory_gib") else ""
    return f"{m['cores']}-core {m['cpu']}{isa}{memory}"
