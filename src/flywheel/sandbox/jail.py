"""The bubblewrap command line of a jailed zygote, the host user it runs as, and the check that it can run here.

Host privilege: bubblewrap maps the jail's user (65534 inside) to the user that *starts* bwrap. Started by root,
that is host uid 0: kernel checks that look at the host uid (sysctl writes under /proc/sys, RLIMIT_NPROC, which
never binds for root) would treat jailed code as root. So when the caller is root, bwrap is started as
``HOST_ID`` + k, a uid and gid no account uses, with no supplementary groups: every process of the jail is that
unprivileged host user. Each worker claims its own k (``claim_host_uid``: a lock held for the worker's life, so
pools in other processes never share one), so per-user kernel limits (inotify instances, pending signals,
in-flight descriptors, pipe buffers) are not shared between tenants. Non-root callers' jails are their own uid.

Because bwrap then cannot read the caller's files (the package may live under /root), the zygote's modules enter
the jail as copies (``--ro-bind-data`` from memfds), not bind mounts. /proc is the jail's own (its PID namespace);
/proc/sys is covered by an empty read-only tmpfs (sysctls are global; bwrap leaves /proc/sys writable for
whatever the jail's host uid may write); /sys is absent.

Device nodes: bwrap's minimal /dev binds the host's /dev/null, /dev/zero... into the jail, and a node anyone may
write is one whose times anyone may set to now (``utime``): a jail changed the host's /dev/null. A root caller's
jails get nodes of their own instead (``private_devices``: the same devices, made for the worker and owned by its
host uid), which the zygote resets with every wipe; a caller that cannot make device nodes (not root, or root
without CAP_MKNOD, as in many containers) has its jails bind the host's (the jail can then do to them what the
caller can).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

JAIL_PYTHON = "/usr/bin/python3"  # Debian's interpreter: the caller's Python (under /root) is not in the jail
ZYGOTE_FILES = ("zygote.py", "wire.py", "limits.py", "seccomp.py")  # standard-library-only modules
_HERE = Path(__file__).resolve().parent
_JAIL_DIR = "/opt/sandbox"
_NOBODY = "65534"
HOST_ID = 2_147_000_000  # the first jail host uid and gid when the caller is root: unassigned, unprivileged
HOST_ID_SLOTS = 4096  # workers that can hold a uid of their own at once on one host
_UID_LOCKS = "/run/flywheel-sandbox-uids"
DEVICE_NODES = ("null", "zero", "full", "random", "urandom", "tty")  # what bwrap's --dev binds from the host
_PRIVATE_DEV = "/dev/flywheel-sandbox"  # on the host's /dev, which allows device nodes where /run may not
HOST_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # the only environment bwrap itself (the jail's parent) gets


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be set up on this machine."""


def _system_dirs() -> list[str]:
    """Read-only views of the system: /usr, and /bin, /sbin, /lib, /lib64 as the host has them (links or dirs)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for path in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def host_user(uid: int | None) -> dict:
    """Popen arguments that start bwrap as the unprivileged host user ``uid`` (``claim_host_uid``); None: the caller."""
    return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}


def host_uid_range() -> range:
    """The host uids jailed processes run as: HOST_ID's slots for a root caller, else the caller's own uid."""
    return range(HOST_ID, HOST_ID + HOST_ID_SLOTS) if os.geteuid() == 0 else range(os.geteuid(), os.geteuid() + 1)


def claim_host_uid() -> tuple[int, int]:
    """(uid, lock descriptor): the first of HOST_ID's slots no live worker on this host holds, held until the
    descriptor is closed (or its process dies). SandboxUnavailable when every slot is taken."""
    os.makedirs(_UID_LOCKS, mode=0o700, exist_ok=True)
    for uid in range(HOST_ID, HOST_ID + HOST_ID_SLOTS):
        fd = os.open(f"{_UID_LOCKS}/{uid}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return uid, fd
        except BlockingIOError:
            os.close(fd)
    raise SandboxUnavailable(f"all {HOST_ID_SLOTS} sandbox host uids are held by live workers on this machine; close some sandboxes")


def module_fds() -> list[int]:
    """One memfd per zygote module (same order as ZYGOTE_FILES), its contents at offset 0, for --ro-bind-data."""
    fds = []
    for name in ZYGOTE_FILES:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.write(fd, (_HERE / name).read_bytes())
        os.lseek(fd, 0, os.SEEK_SET)
        fds.append(fd)
    return fds


@functools.cache
def can_make_devices() -> bool:
    """Whether this process may make device nodes under /dev that a jail can open (root with CAP_MKNOD, a writable
    /dev not mounted nodev)."""
    probe = f"{_PRIVATE_DEV}/probe-{os.getpid()}"
    try:
        os.makedirs(_PRIVATE_DEV, mode=0o755, exist_ok=True)
        if os.statvfs(_PRIVATE_DEV).f_flag & os.ST_NODEV:
            return False
        os.mknod(probe, stat.S_IFCHR | 0o600, os.stat("/dev/null").st_rdev)
    except OSError:
        return False
    os.unlink(probe)
    return True


def private_dir(uid: int) -> str:
    """Where the device nodes of the worker whose jail runs as host uid ``uid`` live (``private_devices``)."""
    return f"{_PRIVATE_DEV}/{uid}"


def private_devices(uid: int) -> list[str]:
    """The paths of the device nodes of ``DEVICE_NODES`` the host has, made anew in ``private_dir(uid)`` for the
    worker whose jail runs as host uid ``uid`` (a root caller's, ``claim_host_uid``), owned by it, mode 0666, times
    0: what an execution does to one stays in that worker until the zygote's next wipe resets it, and the host's
    nodes are out of reach."""
    directory = private_dir(uid)
    shutil.rmtree(directory, ignore_errors=True)  # a worker of this uid that died without its cleanup
    os.makedirs(directory, mode=0o755)
    nodes = []
    for name in DEVICE_NODES:
        if os.path.exists(f"/dev/{name}"):
            node = f"{directory}/{name}"
            os.mknod(node, stat.S_IFCHR | 0o666, os.stat(f"/dev/{name}").st_rdev)
            os.chown(node, uid, uid)
            os.chmod(node, 0o666)  # not the umask's
            os.utime(node, (0, 0))
            nodes.append(node)
    return nodes


def bwrap_argv(tmp_size_mb: int, fds: list[int], devices: Sequence[str] = ()) -> list[str]:
    """bwrap options for one zygote: every namespace unshared (no network), an unprivileged user, a read-only root
    with a read-only system, no project, home or host /tmp, a fresh /proc, a read-only minimal /dev, and the only
    writable places: size-capped tmpfs /tmp and /dev/shm (wiped after every execution); no /proc/sys, no /sys;
    the zygote modules copied from ``fds`` (``module_fds``); the nodes ``devices`` (``private_devices``) over
    those of the minimal /dev;
    the zygote is PID 1 of its PID namespace, so its death kills every process of the jail."""
    size = str(tmp_size_mb << 20)
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--uid",
        _NOBODY,
        "--gid",
        _NOBODY,
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        *_system_dirs(),
        "--proc",
        "/proc",
        "--tmpfs",
        "/proc/sys",
        "--remount-ro",
        "/proc/sys",
        "--dev",
        "/dev",
        *(arg for node in devices for arg in ("--dev-bind", node, f"/dev/{os.path.basename(node)}")),
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
    ]
    for name, fd in zip(ZYGOTE_FILES, fds):
        argv += ["--ro-bind-data", str(fd), f"{_JAIL_DIR}/{name}"]
    return argv + ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv", "--setenv", "PATH", HOST_ENV["PATH"], "--setenv", "LANG", "C.UTF-8"]


def jail_command(tmp_size_mb: int, fds: list[int], cgroup_fds: list[int], devices: Sequence[str] = ()) -> list[str]:
    """The full command that starts a jailed zygote; executions join the cgroups open on ``cgroup_fds``; the
    zygote resets the jail's private device nodes (``devices``) with every wipe."""
    names = ",".join(os.path.basename(node) for node in devices) or "-"
    return bwrap_argv(tmp_size_mb, fds, devices) + [
        JAIL_PYTHON,
        "-I",
        "-B",
        f"{_JAIL_DIR}/zygote.py",
        "jail",
        names,
        "-",
        ",".join(map(str, cgroup_fds)),
    ]


def host_command(scratch: str, uid: int | None, cgroup_fds: list[int]) -> list[str]:
    """The command that starts an unjailed zygote (rlimits-only mode); children switch to ``uid`` when given."""
    return [JAIL_PYTHON, "-I", "-B", str(_HERE / "zygote.py"), "host", scratch, str(uid) if uid is not None else "-", ",".join(map(str, cgroup_fds))]


@functools.cache
def check_bubblewrap() -> None:
    """Raise SandboxUnavailable (one sentence: what is missing, how to install it) unless a jail can start here."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`.")
    check_python()
    fds = module_fds()
    try:
        probe = subprocess.run(
            bwrap_argv(1, fds) + [JAIL_PYTHON, "-I", "-c", "pass"],
            pass_fds=fds,
            cwd="/",
            **host_user(host_uid_range()[0] if os.geteuid() == 0 else None),
            env=HOST_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        reason = (probe.stderr.strip().splitlines() or ["no error message"])[-1] if probe.returncode else None
    except OSError as exc:
        reason = str(exc)
    finally:
        for fd in fds:
            os.close(fd)
    if reason is not None:
        raise SandboxUnavailable(
            f"bubblewrap cannot create its user namespaces here as uid {host_uid_range()[0]} ({reason}); enable "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or install a setuid bwrap "
            "with `apt-get install bubblewrap`."
        )


def check_python() -> None:
    if not os.access(JAIL_PYTHON, os.X_OK):
        raise SandboxUnavailable(f"{JAIL_PYTHON} is missing; install it with `apt-get install python3`.")
