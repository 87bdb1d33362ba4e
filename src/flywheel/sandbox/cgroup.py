"""Per-worker cgroups: the total memory and process count of one execution, all its processes together.

Why: rlimits are per process (RLIMIT_AS) or per user (RLIMIT_NPROC). Children together, memfds and tmpfs pages
escape RLIMIT_AS; a group caps them all, and the kernel's OOM killer acts inside the group only.

How: the host (root, or a user with a delegated cgroup) makes one group per worker under its own cgroup, sets the
caps, opens the group's ``cgroup.procs`` for writing and hands that descriptor to the zygote, which writes "0" to
it (joining) and closes it before anything else; the jail never sees cgroupfs. Supervisors and executions are
then born in the group: no process is moved per execution (a move waits for an RCU grace period, which took up to
200 ms under load here). Every process of an execution is killed before the next one starts, so the group holds
one execution at a time, plus the zygote and the supervisor: the caps leave room for them (``worker_caps``), and
executions ask the OOM killer to take them first (oom_score_adj 1000, zygote.py).

Which: cgroup v2 where the caller's group can give ``memory`` and ``pids`` to a child; else the v1 ``memory`` and
``pids`` hierarchies (this project's CI hosts: v1, with an empty cgroup2 at /sys/fs/cgroup/unified); else none,
and ``probe`` says why. v2 support is written to the kernel documentation but has not run on a v2 host here. On
v2, a group that holds processes cannot give controllers to children ("no internal processes"): a caller that
sits in such a group (a container's root group, a systemd service's group) is not moved out of it, so it gets
none (and ``Sandbox`` refuses unless ``cgroup="best-effort"``).
"""

from __future__ import annotations

import itertools
import os
import time

_ROOT = "/sys/fs/cgroup"
_MIB = 1 << 20
_counter = itertools.count()


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its cgroup2 path."""
    paths = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _v2_mount() -> str | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _remove(path: str) -> None:
    """rmdir a group; its last tasks may take a moment to leave after being killed."""
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


class Groups:
    """The group directories of one worker and the descriptors (cgroup.procs, write-only) the zygote inherits."""

    def __init__(self, dirs: list[str]) -> None:
        self.dirs = dirs
        self.fds: list[int] = []
        try:
            self.fds = [os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in dirs]
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        for d in self.dirs:
            _remove(d)


def _prefix() -> str:
    """Group names carry the PID namespace and PID of their maker: "flywheel-sandbox-<ns>-<pid>-"."""
    return f"flywheel-sandbox-{os.stat('/proc/self/ns/pid').st_ino}-"


def _remove_stale(parent: str) -> None:
    """Remove empty groups made in this PID namespace by a process that is gone (killed before cleaning up)."""
    prefix = _prefix()
    for entry in os.scandir(parent):
        owner = entry.name[len(prefix) :].split("-")[0] if entry.name.startswith(prefix) else ""
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(entry.path)
            except OSError:
                pass


def _make(parent: str, caps: dict[str, str]) -> str:
    _remove_stale(parent)
    path = os.path.join(parent, f"{_prefix()}{os.getpid()}-{next(_counter)}")
    os.mkdir(path, 0o700)
    try:
        for name, value in caps.items():
            if os.path.exists(os.path.join(path, name)):
                _write(os.path.join(path, name), value)
            elif not name.startswith("memory.memsw") and not name.startswith("memory.swap"):
                raise OSError(f"{path} has no {name}")
    except OSError:
        _remove(path)
        raise
    return path


SUPERVISOR_MB = 16  # the supervisor's copy-on-write pages (the zygote's were charged before it joined)
SUPERVISOR_TASKS = 2  # the zygote and the supervisor


def worker_caps(memory_mb: int, processes: int) -> tuple[int, int]:
    """The group's caps for executions of ``memory_mb`` and ``processes``: room for zygote and supervisor too."""
    return memory_mb + SUPERVISOR_MB, processes + SUPERVISOR_TASKS


def create(version: str, memory_mb: int, processes: int) -> Groups:
    """A worker's groups: memory capped at ``memory_mb`` (no swap), at most ``processes`` tasks (threads count)."""
    limit = str(memory_mb * _MIB)
    own = _own_paths()
    if version == "v2":
        parent = os.path.join(_v2_mount() or _ROOT, own[""].lstrip("/"))
        return Groups([_make(parent, {"memory.max": limit, "memory.swap.max": "0", "pids.max": str(processes)})])
    memory = _make(os.path.join(_ROOT, "memory", own["memory"].lstrip("/")), {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit})
    try:
        pids = _make(os.path.join(_ROOT, "pids", own["pids"].lstrip("/")), {"pids.max": str(processes)})
    except OSError:
        _remove(memory)
        raise
    return Groups([memory, pids])


def _v2_ready() -> bool:
    """Whether the caller's cgroup2 group can give memory and pids to a child group (enabling them if needed)."""
    mount, own = _v2_mount(), _own_paths()
    if mount is None or "" not in own:
        return False
    group = os.path.join(mount, own[""].lstrip("/"))
    try:
        with open(os.path.join(group, "cgroup.controllers")) as f:
            if not {"memory", "pids"} <= set(f.read().split()):
                return False
        with open(os.path.join(group, "cgroup.subtree_control")) as f:
            if {"memory", "pids"} <= set(f.read().split()):
                return True
        _write(os.path.join(group, "cgroup.subtree_control"), "+memory +pids")
        return True
    except OSError:
        return False


def probe() -> tuple[str | None, str]:
    """("v2" or "v1", "") when a capped group can be made and entered here, else (None, why not)."""
    reasons = []
    for version in ("v2", "v1"):
        if version == "v2" and not _v2_ready():
            reasons.append("cgroup v2: no memory and pids controllers to delegate")
            continue
        try:
            create(version, 64, 8).close()
            return version, ""
        except (OSError, KeyError) as exc:
            reasons.append(f"cgroup {version}: {exc}")
    return None, "; ".join(reasons)
