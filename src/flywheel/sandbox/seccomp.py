"""A seccomp-BPF syscall filter built in pure Python and installed with prctl through ctypes (standard library only).

Why not bwrap's ``--seccomp FD``: that filter would also bind the zygote, and the filter is only wanted on the
per-execution child, which installs it itself right before running candidate code (after PR_SET_NO_NEW_PRIVS).

Policy (an allow list: what CPython and its standard library call; any other call, one added to the kernel later
included, fails with ENOSYS, as on a kernel without it, so libc and CPython fall back where they can):
- a foreign architecture (and x86-64's x32 ABI) kills the process, so syscall numbers cannot be aliased;
- ptrace, process_vm_*, mount family, namespaces (unshare, setns, namespace flags of clone), module and kexec
  loading, bpf, perf_event_open, keyrings, userfaultfd, io_uring, reboot, swap, personality, clock setting, ...
  fail with EPERM, and so do SysV IPC and POSIX message queues (they would outlive an execution in the
  jail's IPC namespace);
- clone3 fails with ENOSYS (its flags live in memory a filter cannot read; libc then falls back to clone);
- socket() is allowed for AF_UNIX only (EAFNOSUPPORT otherwise);
- descriptors cannot name a process to signal when they are ready (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG; ioctl
  FIOSETOWN, SIOCSPGRP fail with EPERM): the kernel would deliver SIGIO, or any signal, to the supervisor for them;
- inode flags cannot be set (ioctl FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR fail with EPERM): they would survive the wipe;
- kill(-1, ...) and kill(1, ...) fail with EPERM (no signalling every process, nor the zygote / host init), and
  so do kill, tkill, tgkill, rt_sigqueueinfo and rt_tgsigqueueinfo aimed at 1 or at the ``guard`` PID (the
  execution's supervisor); pidfd_send_signal fails with EPERM (a /proc/<pid> directory is a pidfd too);
- page-cache residency and eviction (mincore, fadvise64), sync, syncfs, sync_file_range, flock, inotify and fanotify
  fail with EPERM: through the read-only files every jail shares they observe or affect other tenants;
- prctl(PR_SET_DUMPABLE) fails with EPERM: the execution stays undumpable, so it cannot rewrite its OOM score;
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
_PR_SET_DUMPABLE = 4
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
# ioctl commands refused: FIOSETOWN, SIOCSPGRP (above), and inode flags (FS_IOC_SETFLAGS, its 32-bit form,
# FS_IOC_FSSETXATTR), which would survive the wipe of the worker's private roots.
_REFUSED_IOCTL = (0x8901, 0x8902, 0x40086602, 0x40046602, 0x401C5820)

_AF_UNIX = 1
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

_DENIED = (
    "ptrace process_vm_readv process_vm_writev mount umount2 pivot_root chroot kexec_load kexec_file_load "
    "init_module finit_module delete_module bpf perf_event_open keyctl add_key request_key unshare setns "
    "userfaultfd reboot swapon swapoff personality io_uring_setup io_uring_enter io_uring_register "
    "open_by_handle_at name_to_handle_at open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr "
    "pidfd_getfd kcmp acct settimeofday clock_settime adjtimex clock_adjtime syslog quotactl vhangup lookup_dcookie "
    "shmget semget msgget mq_open pidfd_send_signal "
    "mincore fadvise64 sync syncfs sync_file_range flock inotify_init inotify_init1 inotify_add_watch inotify_rm_watch "
    "fanotify_init fanotify_mark"
).split()
_SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # first argument: the target
#: What CPython and its standard library call, with the calls above that take argument rules; anything else (a call
#: added to the kernel later included) fails with ENOSYS, as on a kernel without it.
_ALLOWED = (
    "read write readv writev pread64 pwrite64 preadv pwritev open openat openat2 creat close close_range lseek dup "
    "dup2 dup3 stat fstat lstat newfstatat statx statfs fstatfs access faccessat faccessat2 readlink readlinkat "
    "getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 link "
    "linkat symlink symlinkat chmod fchmod fchmodat chown fchown lchown fchownat truncate ftruncate fallocate "
    "fsync fdatasync umask utime utimes utimensat futimesat getxattr lgetxattr fgetxattr listxattr llistxattr "
    "flistxattr setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr mmap munmap mprotect mremap brk "
    "madvise msync membarrier memfd_create fork vfork execve execveat exit exit_group wait4 waitid getpid getppid "
    "gettid getpgid getpgrp getsid setsid setpgid getuid geteuid getgid getegid getgroups getresuid getresgid "
    "getrlimit getrusage times uname sysinfo set_tid_address set_robust_list get_robust_list arch_prctl rseq "
    "sched_yield sched_getaffinity sched_getparam sched_getscheduler sched_get_priority_max sched_get_priority_min "
    "sched_rr_get_interval getpriority ioprio_get getcpu capget rt_sigaction rt_sigprocmask rt_sigreturn "
    "rt_sigpending rt_sigtimedwait rt_sigsuspend sigaltstack pause alarm setitimer getitimer signalfd signalfd4 "
    "restart_syscall nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time timer_create "
    "timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create timerfd_settime timerfd_gettime "
    "futex poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 "
    "eventfd eventfd2 pipe pipe2 socketpair connect accept accept4 bind listen getsockname getpeername sendto "
    "recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown setsockopt getsockopt getrandom sendfile splice tee "
    "copy_file_range pidfd_open "
).split()


# Numbers from <asm/unistd_64.h> (x86-64) and <asm-generic/unistd.h> (aarch64), for every name below.
_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "read": 0,
            "write": 1,
            "open": 2,
            "close": 3,
            "stat": 4,
            "fstat": 5,
            "lstat": 6,
            "poll": 7,
            "lseek": 8,
            "mmap": 9,
            "mprotect": 10,
            "munmap": 11,
            "brk": 12,
            "rt_sigaction": 13,
            "rt_sigprocmask": 14,
            "rt_sigreturn": 15,
            "ioctl": 16,
            "pread64": 17,
            "pwrite64": 18,
            "readv": 19,
            "writev": 20,
            "access": 21,
            "pipe": 22,
            "select": 23,
            "sched_yield": 24,
            "mremap": 25,
            "msync": 26,
            "mincore": 27,
            "madvise": 28,
            "shmget": 29,
            "dup": 32,
            "dup2": 33,
            "pause": 34,
            "nanosleep": 35,
            "getitimer": 36,
            "alarm": 37,
            "setitimer": 38,
            "getpid": 39,
            "sendfile": 40,
            "socket": 41,
            "connect": 42,
            "accept": 43,
            "sendto": 44,
            "recvfrom": 45,
            "sendmsg": 46,
            "recvmsg": 47,
            "shutdown": 48,
            "bind": 49,
            "listen": 50,
            "getsockname": 51,
            "getpeername": 52,
            "socketpair": 53,
            "setsockopt": 54,
            "getsockopt": 55,
            "clone": 56,
            "fork": 57,
            "vfork": 58,
            "execve": 59,
            "exit": 60,
            "wait4": 61,
            "kill": 62,
            "uname": 63,
            "semget": 64,
            "msgget": 68,
            "fcntl": 72,
            "flock": 73,
            "fsync": 74,
            "fdatasync": 75,
            "truncate": 76,
            "ftruncate": 77,
            "getdents": 78,
            "getcwd": 79,
            "chdir": 80,
            "fchdir": 81,
            "rename": 82,
            "mkdir": 83,
            "rmdir": 84,
            "creat": 85,
            "link": 86,
            "unlink": 87,
            "symlink": 88,
            "readlink": 89,
            "chmod": 90,
            "fchmod": 91,
            "chown": 92,
            "fchown": 93,
            "lchown": 94,
            "umask": 95,
            "gettimeofday": 96,
            "getrlimit": 97,
            "getrusage": 98,
            "sysinfo": 99,
            "times": 100,
            "ptrace": 101,
            "getuid": 102,
            "syslog": 103,
            "getgid": 104,
            "geteuid": 107,
            "getegid": 108,
            "setpgid": 109,
            "getppid": 110,
            "getpgrp": 111,
            "setsid": 112,
            "getgroups": 115,
            "getresuid": 118,
            "getresgid": 120,
            "getpgid": 121,
            "getsid": 124,
            "capget": 125,
            "rt_sigpending": 127,
            "rt_sigtimedwait": 128,
            "rt_sigqueueinfo": 129,
            "rt_sigsuspend": 130,
            "sigaltstack": 131,
            "utime": 132,
            "uselib": 134,
            "personality": 135,
            "statfs": 137,
            "fstatfs": 138,
            "getpriority": 140,
            "setpriority": 141,
            "sched_setparam": 142,
            "sched_getparam": 143,
            "sched_setscheduler": 144,
            "sched_getscheduler": 145,
            "sched_get_priority_max": 146,
            "sched_get_priority_min": 147,
            "sched_rr_get_interval": 148,
            "vhangup": 153,
            "modify_ldt": 154,
            "pivot_root": 155,
            "prctl": 157,
            "arch_prctl": 158,
            "adjtimex": 159,
            "chroot": 161,
            "sync": 162,
            "acct": 163,
            "settimeofday": 164,
            "mount": 165,
            "umount2": 166,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "iopl": 172,
            "ioperm": 173,
            "init_module": 175,
            "delete_module": 176,
            "quotactl": 179,
            "gettid": 186,
            "setxattr": 188,
            "lsetxattr": 189,
            "fsetxattr": 190,
            "getxattr": 191,
            "lgetxattr": 192,
            "fgetxattr": 193,
            "listxattr": 194,
            "llistxattr": 195,
            "flistxattr": 196,
            "removexattr": 197,
            "lremovexattr": 198,
            "fremovexattr": 199,
            "tkill": 200,
            "time": 201,
            "futex": 202,
            "sched_setaffinity": 203,
            "sched_getaffinity": 204,
            "lookup_dcookie": 212,
            "epoll_create": 213,
            "getdents64": 217,
            "set_tid_address": 218,
            "restart_syscall": 219,
            "fadvise64": 221,
            "timer_create": 222,
            "timer_settime": 223,
            "timer_gettime": 224,
            "timer_getoverrun": 225,
            "timer_delete": 226,
            "clock_settime": 227,
            "clock_gettime": 228,
            "clock_getres": 229,
            "clock_nanosleep": 230,
            "exit_group": 231,
            "epoll_wait": 232,
            "epoll_ctl": 233,
            "tgkill": 234,
            "utimes": 235,
            "mq_open": 240,
            "kexec_load": 246,
            "waitid": 247,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "ioprio_set": 251,
            "ioprio_get": 252,
            "inotify_init": 253,
            "inotify_add_watch": 254,
            "inotify_rm_watch": 255,
            "migrate_pages": 256,
            "openat": 257,
            "mkdirat": 258,
            "fchownat": 260,
            "futimesat": 261,
            "newfstatat": 262,
            "unlinkat": 263,
            "renameat": 264,
            "linkat": 265,
            "symlinkat": 266,
            "readlinkat": 267,
            "fchmodat": 268,
            "faccessat": 269,
            "pselect6": 270,
            "ppoll": 271,
            "unshare": 272,
            "set_robust_list": 273,
            "get_robust_list": 274,
            "splice": 275,
            "tee": 276,
            "sync_file_range": 277,
            "move_pages": 279,
            "utimensat": 280,
            "epoll_pwait": 281,
            "signalfd": 282,
            "timerfd_create": 283,
            "eventfd": 284,
            "fallocate": 285,
            "timerfd_settime": 286,
            "timerfd_gettime": 287,
            "accept4": 288,
            "signalfd4": 289,
            "eventfd2": 290,
            "epoll_create1": 291,
            "dup3": 292,
            "pipe2": 293,
            "inotify_init1": 294,
            "preadv": 295,
            "pwritev": 296,
            "rt_tgsigqueueinfo": 297,
            "perf_event_open": 298,
            "recvmmsg": 299,
            "fanotify_init": 300,
            "fanotify_mark": 301,
            "prlimit64": 302,
            "name_to_handle_at": 303,
            "open_by_handle_at": 304,
            "clock_adjtime": 305,
            "syncfs": 306,
            "sendmmsg": 307,
            "setns": 308,
            "getcpu": 309,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "kcmp": 312,
            "finit_module": 313,
            "sched_setattr": 314,
            "renameat2": 316,
            "getrandom": 318,
            "memfd_create": 319,
            "kexec_file_load": 320,
            "bpf": 321,
            "execveat": 322,
            "userfaultfd": 323,
            "membarrier": 324,
            "copy_file_range": 326,
            "statx": 332,
            "rseq": 334,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "pidfd_open": 434,
            "clone3": 435,
            "close_range": 436,
            "openat2": 437,
            "pidfd_getfd": 438,
            "faccessat2": 439,
            "epoll_pwait2": 441,
            "mount_setattr": 442,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "setxattr": 5,
            "lsetxattr": 6,
            "fsetxattr": 7,
            "getxattr": 8,
            "lgetxattr": 9,
            "fgetxattr": 10,
            "listxattr": 11,
            "llistxattr": 12,
            "flistxattr": 13,
            "removexattr": 14,
            "lremovexattr": 15,
            "fremovexattr": 16,
            "getcwd": 17,
            "lookup_dcookie": 18,
            "eventfd2": 19,
            "epoll_create1": 20,
            "epoll_ctl": 21,
            "epoll_pwait": 22,
            "dup": 23,
            "dup3": 24,
            "fcntl": 25,
            "inotify_init1": 26,
            "inotify_add_watch": 27,
            "inotify_rm_watch": 28,
            "ioctl": 29,
            "ioprio_set": 30,
            "ioprio_get": 31,
            "flock": 32,
            "mkdirat": 34,
            "unlinkat": 35,
            "symlinkat": 36,
            "linkat": 37,
            "renameat": 38,
            "umount2": 39,
            "mount": 40,
            "pivot_root": 41,
            "statfs": 43,
            "fstatfs": 44,
            "truncate": 45,
            "ftruncate": 46,
            "fallocate": 47,
            "faccessat": 48,
            "chdir": 49,
            "fchdir": 50,
            "chroot": 51,
            "fchmod": 52,
            "fchmodat": 53,
            "fchownat": 54,
            "fchown": 55,
            "openat": 56,
            "close": 57,
            "vhangup": 58,
            "pipe2": 59,
            "quotactl": 60,
            "getdents64": 61,
            "lseek": 62,
            "read": 63,
            "write": 64,
            "readv": 65,
            "writev": 66,
            "pread64": 67,
            "pwrite64": 68,
            "preadv": 69,
            "pwritev": 70,
            "sendfile": 71,
            "pselect6": 72,
            "ppoll": 73,
            "signalfd4": 74,
            "splice": 76,
            "tee": 77,
            "readlinkat": 78,
            "newfstatat": 79,
            "fstat": 80,
            "sync": 81,
            "fsync": 82,
            "fdatasync": 83,
            "sync_file_range": 84,
            "timerfd_create": 85,
            "timerfd_settime": 86,
            "timerfd_gettime": 87,
            "utimensat": 88,
            "acct": 89,
            "capget": 90,
            "personality": 92,
            "exit": 93,
            "exit_group": 94,
            "waitid": 95,
            "set_tid_address": 96,
            "unshare": 97,
            "futex": 98,
            "set_robust_list": 99,
            "get_robust_list": 100,
            "nanosleep": 101,
            "getitimer": 102,
            "setitimer": 103,
            "kexec_load": 104,
            "init_module": 105,
            "delete_module": 106,
            "timer_create": 107,
            "timer_gettime": 108,
            "timer_getoverrun": 109,
            "timer_settime": 110,
            "timer_delete": 111,
            "clock_settime": 112,
            "clock_gettime": 113,
            "clock_getres": 114,
            "clock_nanosleep": 115,
            "syslog": 116,
            "ptrace": 117,
            "sched_setparam": 118,
            "sched_setscheduler": 119,
            "sched_getscheduler": 120,
            "sched_getparam": 121,
            "sched_setaffinity": 122,
            "sched_getaffinity": 123,
            "sched_yield": 124,
            "sched_get_priority_max": 125,
            "sched_get_priority_min": 126,
            "sched_rr_get_interval": 127,
            "restart_syscall": 128,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "sigaltstack": 132,
            "rt_sigsuspend": 133,
            "rt_sigaction": 134,
            "rt_sigprocmask": 135,
            "rt_sigpending": 136,
            "rt_sigtimedwait": 137,
            "rt_sigqueueinfo": 138,
            "rt_sigreturn": 139,
            "setpriority": 140,
            "getpriority": 141,
            "reboot": 142,
            "getresuid": 148,
            "getresgid": 150,
            "times": 153,
            "setpgid": 154,
            "getpgid": 155,
            "getsid": 156,
            "setsid": 157,
            "getgroups": 158,
            "uname": 160,
            "getrlimit": 163,
            "getrusage": 165,
            "umask": 166,
            "prctl": 167,
            "getcpu": 168,
            "gettimeofday": 169,
            "settimeofday": 170,
            "adjtimex": 171,
            "getpid": 172,
            "getppid": 173,
            "getuid": 174,
            "geteuid": 175,
            "getgid": 176,
            "getegid": 177,
            "gettid": 178,
            "sysinfo": 179,
            "mq_open": 180,
            "msgget": 186,
            "semget": 190,
            "shmget": 194,
            "socket": 198,
            "socketpair": 199,
            "bind": 200,
            "listen": 201,
            "accept": 202,
            "connect": 203,
            "getsockname": 204,
            "getpeername": 205,
            "sendto": 206,
            "recvfrom": 207,
            "setsockopt": 208,
            "getsockopt": 209,
            "shutdown": 210,
            "sendmsg": 211,
            "recvmsg": 212,
            "brk": 214,
            "munmap": 215,
            "mremap": 216,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "clone": 220,
            "execve": 221,
            "mmap": 222,
            "fadvise64": 223,
            "swapon": 224,
            "swapoff": 225,
            "mprotect": 226,
            "msync": 227,
            "mincore": 232,
            "madvise": 233,
            "migrate_pages": 238,
            "move_pages": 239,
            "rt_tgsigqueueinfo": 240,
            "perf_event_open": 241,
            "accept4": 242,
            "recvmmsg": 243,
            "wait4": 260,
            "prlimit64": 261,
            "fanotify_init": 262,
            "fanotify_mark": 263,
            "name_to_handle_at": 264,
            "open_by_handle_at": 265,
            "clock_adjtime": 266,
            "syncfs": 267,
            "setns": 268,
            "sendmmsg": 269,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "kcmp": 272,
            "finit_module": 273,
            "sched_setattr": 274,
            "renameat2": 276,
            "getrandom": 278,
            "memfd_create": 279,
            "bpf": 280,
            "execveat": 281,
            "userfaultfd": 282,
            "membarrier": 283,
            "copy_file_range": 285,
            "statx": 291,
            "rseq": 293,
            "kexec_file_load": 294,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "pidfd_open": 434,
            "clone3": 435,
            "close_range": 436,
            "openat2": 437,
            "pidfd_getfd": 438,
            "faccessat2": 439,
            "epoll_pwait2": 441,
            "mount_setattr": 442,
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
        if name in nr:  # aarch64 has no legacy calls (inotify_init)
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
    for name, commands in (("fcntl", _SIGNAL_OWNER_FCNTL), ("ioctl", _REFUSED_IOCTL)):  # (fd, command, ...)
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
    prog += [  # prctl(option, ...): not PR_SET_DUMPABLE (the supervisor made the execution undumpable)
        _insn(_JEQ_K, nr["prctl"], jf=4),
        _insn(_LD_W_ABS, _OFF_ARG0_LOW),
        _insn(_JEQ_K, _PR_SET_DUMPABLE, jf=1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    for name in _ALLOWED:
        if name in nr:  # aarch64 has only the *at forms (openat, not open)
            prog += [_insn(_JEQ_K, nr[name], jf=1), _insn(_RET_K, _RET_ALLOW)]
    prog.append(_insn(_RET_K, _RET_ERRNO | errno.ENOSYS))
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
