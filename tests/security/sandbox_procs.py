"""Host-side views of the processes living in a sandbox's jails, found through /proc."""

from __future__ import annotations

import os

from flywheel.sandbox import Sandbox


def _ppids() -> dict[int, int]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    table[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return table


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def jail_namespaces(sb: Sandbox) -> dict[int, str]:
    """{host PID of each zygote: its PID-namespace link}; a zygote is the child of a worker's bwrap."""
    workers = set(sb.worker_pids())
    zygotes = [pid for pid, ppid in _ppids().items() if ppid in workers]
    return {pid: ns for pid in zygotes if (ns := _pid_ns(pid)) is not None}


def processes_in(namespaces: set[str]) -> list[int]:
    """Host PIDs of every process whose PID namespace is one of ``namespaces``."""
    return [pid for pid in _ppids() if _pid_ns(pid) in namespaces]


def stray_processes(sb: Sandbox) -> list[int]:
    """Processes inside the jails other than the zygotes and each one's idle supervisor (one child of the zygote,
    itself childless, waiting for the next request): leftovers of past executions."""
    zygotes = jail_namespaces(sb)
    ppids = _ppids()
    supervisors = {}
    for pid in processes_in(set(zygotes.values())):
        if ppids.get(pid) in zygotes and ppids[pid] not in supervisors:
            supervisors[ppids[pid]] = pid
    others = [pid for pid in processes_in(set(zygotes.values())) if pid not in zygotes]
    return [pid for pid in others if pid not in supervisors.values() or pid in ppids.values()]
