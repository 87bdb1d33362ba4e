"""The bubblewrap command line of a jailed zygote, and the check that bubblewrap can run here."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

JAIL_PYTHON = "/usr/bin/python3"  # Debian's interpreter: the caller's Python (under /root) is not in the jail
ZYGOTE_FILES = ("zygote.py", "wire.py", "limits.py", "seccomp.py")  # standard-library-only modules
_HERE = Path(__file__).resolve().parent
_JAIL_DIR = "/opt/sandbox"
_NOBODY = "65534"
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


def bwrap_argv(tmp_size_mb: int) -> list[str]:
    """bwrap options for one zygote: every namespace unshared (no network), an unprivileged user, a read-only root
    with a read-only system, no project, home or host /tmp, a fresh /proc, a read-only minimal /dev, and the only
    writable places: size-capped tmpfs /tmp and /dev/shm (wiped after every execution);
    the zygote is PID 1 of its PID namespace, so its death kills every process of the jail."""
    size = str(tmp_size_mb << 20)
    argv = [
        shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--uid", _NOBODY, "--gid", _NOBODY, "--disable-userns",
        "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--hostname", "sandbox",
        *_system_dirs(),
        "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
        "--size", size, "--tmpfs", "/tmp",
    ]
    for name in ZYGOTE_FILES:
        argv += ["--ro-bind", str(_HERE / name), f"{_JAIL_DIR}/{name}"]
    return argv + ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv", "--setenv", "PATH", HOST_ENV["PATH"], "--setenv", "LANG", "C.UTF-8"]


def jail_command(tmp_size_mb: int) -> list[str]:
    """The full command that starts a jailed zygote."""
    return bwrap_argv(tmp_size_mb) + [JAIL_PYTHON, "-I", "-B", f"{_JAIL_DIR}/zygote.py", "jail"]


def host_command(scratch: str, uid: int | None) -> list[str]:
    """The command that starts an unjailed zygote (rlimits-only mode); children switch to ``uid`` when given."""
    return [JAIL_PYTHON, "-I", "-B", str(_HERE / "zygote.py"), "host", scratch, *([str(uid)] if uid is not None else [])]


@functools.cache
def check_bubblewrap() -> None:
    """Raise SandboxUnavailable (one sentence: what is missing, how to install it) unless a jail can start here."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`.")
    check_python()
    probe = subprocess.run(
        bwrap_argv(1) + [JAIL_PYTHON, "-I", "-c", "pass"],
        env=HOST_ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no error message"])[-1]
        raise SandboxUnavailable(
            f"bubblewrap cannot create its user namespaces here ({reason}); enable unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1) or install a setuid bwrap with `apt-get install bubblewrap`."
        )


def check_python() -> None:
    if not os.access(JAIL_PYTHON, os.X_OK):
        raise SandboxUnavailable(f"{JAIL_PYTHON} is missing; install it with `apt-get install python3`.")
