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


def processes_in(namespaces: set[str], ppids: dict[int, int] | None = None) -> list[int]:
    """Host PIDs of every process whose PID namespace is one of ``namespaces`` (among ``ppids``' keys if given)."""
    return [pid for pid in (ppids if ppids is not None else _ppids()) if _pid_ns(pid) in namespaces]


def stray_processes(sb: Sandbox) -> list[int]:
    """Processes inside the jails other than the zygotes and what each keeps ready for its next request (one
    supervisor, a child of the zygote, and that supervisor's one waiting child): leftovers of past executions."""
    zygotes = jail_namespaces(sb)
    ppids = _ppids()  # one snapshot: a waiting child forked meanwhile is not mistaken for a stray
    inside = [pid for pid in processes_in(set(zygotes.values()), ppids) if pid not in zygotes]
    children = {pid: [c for c in inside if ppids.get(c) == pid] for pid in [*zygotes, *inside]}
    ready = set()
    for zygote in zygotes:
        if len(children[zygote]) != 1:
            continue
        supervisor = children[zygote][0]
        waiting = children[supervisor]
        if len(waiting) <= 1 and not any(children[w] for w in waiting):
            ready.update([supervisor, *waiting])
    return [pid for pid in inside if pid not in ready]


def supervisors(sb: Sandbox) -> list[int]:
    """Host PIDs of the jails' supervisors: each zygote's child that has a child of its own (the execution, or the
    child it keeps waiting for the next one)."""
    zygotes = set(jail_namespaces(sb))
    ppids = _ppids()
    parents = set(ppids.values())
    return [pid for pid, ppid in ppids.items() if ppid in zygotes and pid in parents]
