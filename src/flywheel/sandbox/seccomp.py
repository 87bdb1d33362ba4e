"""A seccomp-BPF syscall filter built in pure Python and installed with prctl through ctypes (standard library only).

Why not bwrap's ``--seccomp FD``: that filter would also bind the zygote, and the filter is only wanted on the
per-execution child, which installs it itself right before running candidate code (after PR_SET_NO_NEW_PRIVS).

Policy (default allow, a deny list of kernel-attack-surface and escape syscalls):
- a foreign architecture (and x86-64's x32 ABI) kills the process, so syscall numbers cannot be aliased;
- ptrace, process_vm_*, mount family, namespaces (unshare, setns, namespace flags of clone), module and kexec
  loading, bpf, perf_event_open, keyrings, userfaultfd, io_uring, reboot, swap, personality, clock setting, ...
  fail with EPERM, and so do SysV IPC and POSIX message queues (they would outlive an execution in the
  jail's IPC namespace);
- clone3 fails with ENOSYS (its flags live in memory a filter cannot read; libc then falls back to clone);
- socket() is allowed for AF_UNIX only (EAFNOSUPPORT otherwise);
- descriptors cannot name a process to signal when they are ready (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG; ioctl
  FIOSETOWN, SIOCSPGRP fail with EPERM): the kernel would deliver SIGIO, or any signal, to the supervisor for them;
- kill(-1, ...) and kill(1, ...) fail with EPERM (no signalling every process, nor the zygote / host init), and
  so do kill, tkill, tgkill, rt_sigqueueinfo and rt_tgsigqueueinfo aimed at 1 or at the ``guard`` PID (the
  execution's supervisor); pidfd_send_signal fails with EPERM (a /proc/<pid> directory is a pidfd too);
- calls that change another process's limits or scheduling act on the caller only: prlimit64, sched_setaffinity,
  sched_setscheduler, sched_setparam, sched_setattr, migrate_pages and move_pages need pid 0, setpriority and
  ioprio_set need (PRIO_PROCESS / IOPRIO_WHO_PROCESS, 0); otherwise EPERM. (The jail's processes share one uid,
  so without this an execution could lower its zygote's limits for every later execution.)
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LOW = 16  # args[0], low 32 bits (little-endian)
_OFF_ARG1_LOW = 24
_SELF_ONLY = (
    "prlimit64",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)  # first argument: a PID
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
# Commands that make the kernel signal a chosen process when a descriptor is ready (SIGIO or any F_SETSIG signal):
# fcntl F_SETOWN, F_SETSIG, F_SETOWN_EX; ioctl FIOSETOWN, SIOCSPGRP. No kill call is made, so the signal rules
# below would never see one aimed at the supervisor.
_SIGNAL_OWNER_FCNTL = (8, 10, 15)
_SIGNAL_OWNER_IOCTL = (0x8901, 0x8902)

_AF_UNIX = 1
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

_DENIED = (
    "ptrace process_vm_readv process_vm_writev mount umount2 pivot_root chroot kexec_load kexec_file_load "
    "init_module finit_module delete_module bpf perf_event_open keyctl add_key request_key unshare setns "
    "userfaultfd reboot swapon swapoff personality io_uring_setup io_uring_enter io_uring_register "
    "open_by_handle_at name_to_handle_at open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr "
    "pidfd_getfd kcmp acct settimeofday clock_settime adjtimex clock_adjtime syslog quotactl vhangup lookup_dcookie "
    "shmget semget msgget mq_open pidfd_send_signal"
).split()
_SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # first argument: the target

# Numbers from <asm/unistd_64.h> (x86-64) and <asm-generic/unistd.h> (aarch64).
_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "bpf": 321,
            "perf_event_open": 298,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "unshare": 272,
            "setns": 308,
            "userfaultfd": 323,
            "reboot": 169,
            "swapon": 167,
            "swapoff": 168,
            "personality": 135,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "pidfd_getfd": 438,
            "kcmp": 312,
            "acct": 163,
            "settimeofday": 164,
            "clock_settime": 227,
            "adjtimex": 159,
            "clock_adjtime": 305,
            "syslog": 103,
            "quotactl": 179,
            "vhangup": 153,
            "lookup_dcookie": 212,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
            "mq_open": 240,
            "iopl": 172,
            "ioperm": 173,
            "modify_ldt": 154,
            "uselib": 134,
            "socket": 41,
            "clone": 56,
            "fcntl": 72,
            "ioctl": 16,
            "clone3": 435,
            "kill": 62,
            "pidfd_send_signal": 424,
            "tkill": 200,
            "tgkill": 234,
            "rt_sigqueueinfo": 129,
            "rt_tgsigqueueinfo": 297,
            "prlimit64": 302,
            "sched_setaffinity": 203,
            "sched_setscheduler": 144,
            "sched_setparam": 142,
            "sched_setattr": 314,
            "migrate_pages": 256,
            "move_pages": 279,
            "setpriority": 141,
            "ioprio_set": 251,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "bpf": 280,
            "perf_event_open": 241,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "unshare": 97,
            "setns": 268,
            "userfaultfd": 282,
            "reboot": 142,
            "swapon": 224,
            "swapoff": 225,
            "personality": 92,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "pidfd_getfd": 438,
            "kcmp": 272,
            "acct": 89,
            "settimeofday": 170,
            "clock_settime": 112,
            "adjtimex": 171,
            "clock_adjtime": 266,
            "syslog": 116,
            "quotactl": 60,
            "vhangup": 58,
            "lookup_dcookie": 18,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
            "mq_open": 180,
            "socket": 198,
            "clone": 220,
            "fcntl": 25,
            "ioctl": 29,
            "clone3": 435,
            "kill": 129,
            "pidfd_send_signal": 424,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "rt_tgsigqueueinfo": 240,
            "prlimit64": 261,
            "sched_setaffinity": 122,
            "sched_setscheduler": 119,
            "sched_setparam": 118,
            "sched_setattr": 274,
            "migrate_pages": 238,
            "move_pages": 239,
            "setpriority": 140,
            "ioprio_set": 30,
        },
    ),
}
_X86_ONLY = ("iopl", "ioperm", "modify_ldt", "uselib")


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


_GUARD = 0x7FFFFFFF  # placeholder for the guarded PID (above any pid_max), set by ``guarded``


def guarded(program: bytes, pid: int) -> bytes:
    """``program`` with signals to ``pid`` refused too (a cheap patch: the supervisor does this per execution)."""
    return program.replace(_insn(_JEQ_K, _GUARD, jf=1), _insn(_JEQ_K, pid, jf=1))


def build_filter(machine: str | None = None, guard: int = _GUARD) -> bytes:
    """The BPF program (packed ``struct sock_filter`` array) for ``machine`` (default: this one); signals to PID 1
    and to ``guard`` (see ``guarded``) are refused."""
    machine = machine or platform.machine()
    if machine not in _TABLES or sys.byteorder != "little":
        raise OSError(f"no seccomp syscall table for {machine} ({sys.byteorder}-endian)")
    arch, nr = _TABLES[machine]
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _OFF_NR),
    ]
    if machine == "x86_64":  # x32 ABI: same calls under nr | 0x40000000
        prog += [_insn(_JGE_K, 0x40000000, jf=1), _insn(_RET_K, _RET_KILL_PROCESS)]
    for name in [*_DENIED, *(_X86_ONLY if machine == "x86_64" else ())]:
        prog += [_insn(_JEQ_K, nr[name], jf=1), _insn(_RET_K, eperm)]
    prog += [_insn(_JEQ_K, nr["clone3"], jf=1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    prog += [  # socket(domain, ...): AF_UNIX only
        _insn(_JEQ_K, nr["socket"], jf=4),
        _insn(_LD_W_ABS, _OFF_ARG0_LOW),
        _insn(_JEQ_K, _AF_UNIX, jf=1),
        _insn(_RET_K, _RET_ALLOW),
        _insn(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT),
    ]
    prog += [  # clone(flags, ...): no new namespaces
        _insn(_JEQ_K, nr["clone"], jf=4),
        _insn(_LD_W_ABS, _OFF_ARG0_LOW),
        _insn(_JSET_K, _NAMESPACE_FLAGS, jf=1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    for name in _SIGNALS:  # (target, ...): not -1 (everyone), nor 1, nor the guard
        prog += [
            _insn(_JEQ_K, nr[name], jf=6),
            _insn(_LD_W_ABS, _OFF_ARG0_LOW),
            _insn(_JEQ_K, 0xFFFFFFFF, jt=2),
            _insn(_JEQ_K, 1, jt=1),
            _insn(_JEQ_K, guard, jf=1),
            _insn(_RET_K, eperm),
            _insn(_RET_K, _RET_ALLOW),
        ]
    for name in _SELF_ONLY:  # (pid, ...): pid 0 only
        prog += [
            _insn(_JEQ_K, nr[name], jf=4),
            _insn(_LD_W_ABS, _OFF_ARG0_LOW),
            _insn(_JEQ_K, 0, jf=1),
            _insn(_RET_K, _RET_ALLOW),
            _insn(_RET_K, eperm),
        ]
    for name, commands in (("fcntl", _SIGNAL_OWNER_FCNTL), ("ioctl", _SIGNAL_OWNER_IOCTL)):  # (fd, command, ...)
        prog += [_insn(_JEQ_K, nr[name], jf=2 + 2 * len(commands)), _insn(_LD_W_ABS, _OFF_ARG1_LOW)]
        for command in commands:
            prog += [_insn(_JEQ_K, command, jf=1), _insn(_RET_K, eperm)]
        prog.append(_insn(_RET_K, _RET_ALLOW))
    for name, which in (("setpriority", _PRIO_PROCESS), ("ioprio_set", _IOPRIO_WHO_PROCESS)):  # (which, who, ...)
        prog += [
            _insn(_JEQ_K, nr[name], jf=6),
            _insn(_LD_W_ABS, _OFF_ARG0_LOW),
            _insn(_JEQ_K, which, jf=3),
            _insn(_LD_W_ABS, _OFF_ARG1_LOW),
            _insn(_JEQ_K, 0, jf=1),
            _insn(_RET_K, _RET_ALLOW),
            _insn(_RET_K, eperm),
        ]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)  # made once, before the zygote forks
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]


def install(program: bytes) -> None:
    """Set no_new_privs and load ``program`` for this process and every process it creates afterwards."""
    libc = _libc
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
