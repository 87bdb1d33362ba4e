"""Escape and abuse attempts against one shared sandbox pool; each asserts containment, checked from the host.

The last test closes the pool and checks that no process of any jail survives.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import threading
import time
from pathlib import Path
from textwrap import dedent

from sandbox_procs import jail_namespaces, processes_in, stray_processes, supervisors

from flywheel.sandbox import Sandbox
from flywheel.sandbox.core import SPARE_RESULT_LINES

REPO = Path(__file__).resolve().parents[2]


def run(sb: Sandbox, code: str, stdin: str = ""):
    return sb.run(dedent(code), stdin=stdin)


def assert_pool_healthy(sb: Sandbox, pids: list[int] | None = None) -> None:
    """Every worker still answers, none was replaced, and no process of past executions is left."""
    for _ in range(sb.workers):
        assert run(sb, "print('alive')").stdout == "alive\n"
    if pids is not None:
        assert sb.worker_pids() == pids
    assert stray_processes(sb) == []


# --- positive behaviour -------------------------------------------------------------------------------------------


def test_stdin_stdout_and_exit_code(sb):
    r = run(sb, "import sys\nprint(sys.stdin.read().upper(), end='')\nsys.exit(3)", stdin="hello\n")
    assert (r.stdout, r.exit_code, r.timed_out, r.truncated, r.error) == ("HELLO\n", 3, False, False, None)
    r = run(sb, "raise ValueError('boom')")
    assert r.exit_code == 1 and "ValueError: boom" in r.stderr


def test_correct_code_passes_and_wrong_code_fails(sb):
    cases = [((1, 2), 3), ((-5, 5), 0), (([1], [2]), [1, 2])]
    good = sb.run_tests("def add(a, b):\n    return a + b\n", "add", cases)
    assert good.all_passed and good.passed == 3
    bad = sb.run_tests("def add(a, b):\n    return a - b\n", "add", cases)
    assert bad.passed == 0 and [c.output for c in bad.cases] == [-1, -10, None]
    assert bad.cases[2].error.startswith("TypeError")
    partial = sb.run_tests("def add(a, b):\n    return 3\n", "add", cases)
    assert [c.passed for c in partial.cases] == [True, False, False]
    missing = sb.run_tests("x = 1\n", "add", cases)
    assert missing.passed == 0


def test_types_are_compared_strictly(sb):
    report = sb.run_tests("def f(x):\n    return x\n", "f", [((True,), 1), ((1,), 1.0), ((None,), 0), (("1",), 1)])
    assert [c.passed for c in report.cases] == [False, True, False, False]


# --- network ------------------------------------------------------------------------------------------------------


def test_tcp_to_host_loopback_server_is_unreachable(sb):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)))
    thread.start()
    r = run(
        sb,
        f"""
        import socket
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect(("127.0.0.1" if family == socket.AF_INET else "::1", {port}))
                print("CONNECTED")
            except OSError as e:
                print("blocked", e.errno)
    """,
    )
    thread.join()
    server.close()
    assert "CONNECTED" not in r.stdout and r.stdout.count("blocked") == 2
    assert accepted == [None]


def _accept(server: socket.socket):
    try:
        return server.accept()
    except TimeoutError:
        return None


def test_dns_resolution_fails(sb):
    r = run(
        sb,
        """
        import socket
        try:
            print(socket.getaddrinfo("example.com", 80))
        except OSError as e:
            print("no-dns", type(e).__name__)
    """,
    )
    assert r.stdout.startswith("no-dns")


def test_raw_netlink_and_packet_sockets_are_denied(sb):
    r = run(
        sb,
        """
        import socket
        for family, kind in ((socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_NETLINK, socket.SOCK_RAW),
                             (socket.AF_INET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_DGRAM)):
            try:
                socket.socket(family, kind)
                print("OPENED")
            except OSError as e:
                print("denied")
    """,
    )
    assert r.stdout.split() == ["denied"] * 4


def test_host_abstract_unix_socket_is_unreachable(sb):
    name = "\0flywheel-test-" + secrets.token_hex(6)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen()
    try:
        r = run(
            sb,
            f"""
            import socket
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect({name!r})
                print("CONNECTED")
            except OSError as e:
                print("refused", e.errno)
        """,
        )
    finally:
        server.close()
    assert r.stdout.startswith("refused")


# --- reading the host ---------------------------------------------------------------------------------------------


def test_host_files_are_not_visible(sb):
    host_tmp = Path("/tmp") / f"flywheel-marker-{secrets.token_hex(4)}"
    host_tmp.write_text("host")
    try:
        r = run(
            sb,
            f"""
            import os
            for path in ("/etc/shadow", "/etc/passwd", {str(REPO)!r}, {str(REPO / "pyproject.toml")!r}, "/root",
                         {str(host_tmp)!r}, "/work", "/home", "/var", "/sys/class/net"):
                try:
                    print("READ", path, os.listdir(path) if os.path.isdir(path) else open(path).read()[:20])
                except OSError as e:
                    print("hidden", path)
            print(sorted(os.listdir("/")))
        """,
        )
    finally:
        host_tmp.unlink()
    assert "READ" not in r.stdout and r.stdout.count("hidden") == 10
    assert r.stdout.splitlines()[-1] == "['bin', 'dev', 'lib', 'lib64', 'opt', 'proc', 'sbin', 'tmp', 'usr']"


def test_caller_environment_is_not_visible(sb, secret):
    r = run(
        sb,
        """
        import os
        print(dict(os.environ))
        for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
            for leaf in ("environ", "cmdline"):
                try:
                    print(open(f"/proc/{pid}/{leaf}", "rb").read())
                except OSError as e:
                    print("denied", pid, leaf)
    """,
    )
    assert secret not in r.stdout and "FLYWHEEL_SANDBOX_TEST_SECRET" not in r.stdout
    assert "denied 1 environ" in r.stdout  # the zygote is not dumpable
    assert "'HOME': '/tmp/run-" in r.stdout and "/root" not in r.stdout


def test_only_own_processes_are_visible(sb):
    r = run(sb, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getppid(), os.getpid())")
    pids, parent, me = r.stdout.rsplit(" ", 2)
    assert pids == f"[1, {int(parent)}, {int(me)}]"  # the zygote (PID 1), this execution's supervisor, and us


def test_hidden_tests_are_out_of_reach_before_the_code_runs(sb):
    hidden_arg, hidden_expected = "arg-" + secrets.token_hex(8), "exp-" + secrets.token_hex(8)
    digests = {hashlib.sha256(v.encode()).hexdigest() for v in (hidden_arg, hidden_expected)}
    code = f"""
        import gc, hashlib, os
        DIGESTS = {sorted(digests)!r}

        def found():
            return any(isinstance(o, str) and hashlib.sha256(o.encode()).hexdigest() in DIGESTS
                       for o in gc.get_objects() + [s for o in gc.get_objects() if isinstance(o, dict) for s in o.values()])

        leaks = []
        if found():
            leaks.append("gc")
        for fd in range(64):
            try:
                os.set_blocking(fd, False)
                if os.read(fd, 1 << 16):
                    leaks.append(f"fd{{fd}}")
            except OSError:
                pass
            finally:
                try:
                    os.set_blocking(fd, True)
                except OSError:
                    pass
        for path in ("/proc/1/mem", "/proc/1/fd/0", "/proc/1/environ"):
            try:
                open(path, "rb").read(1)
                leaks.append(path)
            except OSError:
                pass

        def solve(x):
            expected_seen = any(isinstance(o, str) and hashlib.sha256(o.encode()).hexdigest() == {hashlib.sha256(hidden_expected.encode()).hexdigest()!r}
                                for o in gc.get_objects())
            return leaks + (["expected-in-child"] if expected_seen else []) + [x]
    """
    report = sb.run_tests(dedent(code), "solve", [((hidden_arg,), "whatever")])
    assert report.cases[0].output == [hidden_arg], report


# --- writing outside the private directory ------------------------------------------------------------------------


def test_writes_outside_the_private_dir_do_not_reach_the_host(sb):
    name = f"flywheel-escape-{secrets.token_hex(4)}"
    targets = [f"/usr/{name}", str(REPO / name), f"/tmp/{name}", f"/dev/{name}", f"/{name}", f"/opt/sandbox/{name}"]
    r = run(
        sb,
        f"""
        for path in {targets!r}:
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError:
                print("refused", path)
    """,
    )
    assert r.stdout.count("refused") == 5  # all but /tmp: the jail's own tmpfs, wiped after the execution
    for path in targets:
        assert not Path(path).exists(), path


def test_files_do_not_persist_between_executions(sb):
    run(
        sb,
        """
        import os
        for d in (".", "/tmp", "/dev/shm"):
            open(os.path.join(d, "left-behind"), "w").write("x")
        os.mkdir("/tmp/locked"); os.chmod("/tmp/locked", 0)
    """,
    )
    for _ in range(2 * sb.workers):
        r = run(sb, "import os\nprint(os.listdir('.'), os.listdir('/tmp'), os.listdir('/dev/shm'))")
        assert "left-behind" not in r.stdout and "locked" not in r.stdout
        assert r.stdout.count("run-") == 1  # only this execution's private dir


def test_file_size_and_open_files_limits(sb):
    r = run(
        sb,
        """
        try:
            open("big", "wb").write(b"x" * (64 << 20))
            print("WROTE")
        except OSError as e:
            print("fsize", e.errno)
        fds = []
        try:
            while True:
                fds.append(open("/dev/null"))
        except OSError as e:
            print("nofile", len(fds) < 64)
    """,
    )
    assert r.stdout.split() == ["fsize", "27", "nofile", "True"]  # EFBIG


# --- resource abuse -----------------------------------------------------------------------------------------------


def test_fork_bomb_is_contained(sb):
    pids = sb.worker_pids()
    r = run(
        sb,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
    )
    assert not r.ok and r.wall_s < 4
    assert_pool_healthy(sb, pids)


def test_memory_bomb_is_contained(sb):
    r = run(
        sb,
        """
        chunks = []
        try:
            big = bytearray(8 << 30)
        except MemoryError:
            print("denied-8G")
        while True:
            chunks.append(bytearray(16 << 20))
    """,
    )
    assert r.stdout == "denied-8G\n" and "MemoryError" in r.stderr and r.exit_code == 1


def test_cpu_spin_is_stopped(sb):
    start = time.monotonic()
    r = run(sb, "while True:\n    pass\n")
    assert not r.ok and time.monotonic() - start < 4
    assert r.timed_out or r.exit_code in (-9, -24)  # SIGKILL (wall clock) or SIGXCPU (CPU rlimit)


def test_infinite_output_is_truncated(sb):
    r = run(sb, "import sys\nwhile True:\n    sys.stdout.write('y' * 1000)\n    sys.stderr.write('z' * 1000)\n")
    assert r.stdout_truncated and r.stderr_truncated and not r.ok
    assert len(r.stdout) == len(r.stderr) == sb.output_limit_bytes and r.wall_s < 2


def test_sleeping_past_the_timeout_is_killed(sb):
    r = run(sb, "import time\nprint('start', flush=True)\ntime.sleep(60)\n")
    assert r.timed_out and r.exit_code == -9 and r.stdout == "start\n"
    assert sb.wall_timeout_s <= r.wall_s < sb.wall_timeout_s + 1


# --- processes and signals ----------------------------------------------------------------------------------------


def test_killing_the_parent_fails(sb):
    pids = sb.worker_pids()
    r = run(
        sb,
        """
        import os, signal
        for target, sig in ((os.getppid(), signal.SIGKILL), (1, signal.SIGTERM), (1, signal.SIGSTOP), (-1, signal.SIGKILL)):
            try:
                os.kill(target, sig)
                print("sent", target)
            except OSError as e:
                print("denied", target, e.errno)
        print("still here")
    """,
    )
    assert "sent" not in r.stdout and r.stdout.endswith("still here\n")
    assert_pool_healthy(sb, pids)


def test_kill_minus_one_from_a_shell_fails(sb):
    pids = sb.worker_pids()
    r = run(sb, "import subprocess\nprint(subprocess.run(['/bin/sh', '-c', 'kill -9 -1; echo rc=$?'], capture_output=True, text=True).stdout)")
    assert "rc=1" in r.stdout or "rc=" not in r.stdout  # the shell's kill is refused (or the shell was not spared)
    assert_pool_healthy(sb, pids)


def test_ptrace_and_process_memory_tricks_fail(sb):
    pids = sb.worker_pids()
    r = run(
        sb,
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH, PTRACE_TRACEME = 16, 0
        print("attach", libc.ptrace(PTRACE_ATTACH, 1, None, None), ctypes.get_errno())
        print("traceme", libc.ptrace(PTRACE_TRACEME, 0, None, None), ctypes.get_errno())
        local = (ctypes.c_char * 8)()
        class iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        iov = iovec(ctypes.cast(local, ctypes.c_void_p), 8)
        print("vm_readv", libc.process_vm_readv(1, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0), ctypes.get_errno())
        try:
            open("/proc/1/mem", "r+b")
            print("MEM OPEN")
        except OSError as e:
            print("mem", e.errno)
    """,
    )
    assert r.stdout.split("\n")[:4] == ["attach -1 1", "traceme -1 1", "vm_readv -1 1", "mem 13"], r
    assert_pool_healthy(sb, pids)


def test_namespace_and_mount_syscalls_fail(sb):
    r = run(
        sb,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
        print(libc.unshare(CLONE_NEWUSER), ctypes.get_errno())
        print(libc.unshare(CLONE_NEWNET), ctypes.get_errno())
        print(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None), ctypes.get_errno())
        print(libc.chroot(b"/tmp"), ctypes.get_errno())
        print(libc.syscall(321, 0, 0, 0), ctypes.get_errno())  # bpf
    """,
    )
    assert r.stdout.split("\n")[:5] == ["-1 1"] * 5, r


def test_double_fork_daemon_does_not_survive(sb):
    r = run(
        sb,
        """
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                time.sleep(120)
            os._exit(0)
        os.wait()
        print("daemon started")
    """,
    )
    assert r.stdout == "daemon started\n"
    assert stray_processes(sb) == []


# --- faking a pass ------------------------------------------------------------------------------------------------

CASES = [((2, 3), 6), ((4, 5), 20), ((7, 0), 0)]


def test_exit_before_results_fails(sb):
    for code in (
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "import os\ndef mul(a, b):\n    os._exit(0)\n",
        "def mul(a, b):\n    raise SystemExit(0)\n",
    ):
        report = sb.run_tests(code, "mul", CASES)
        assert report.passed == 0, code


def test_overriding_eq_does_not_fake_a_pass(sb):
    code = """
        class Anything:
            def __eq__(self, other):
                return True
        class LyingInt(int):
            def __eq__(self, other):
                return True
        def mul(a, b):
            return Anything() if a == 2 else LyingInt(-1)
    """
    report = sb.run_tests(dedent(code), "mul", CASES)
    assert report.passed == 0


def test_printing_fake_results_fails(sb):
    code = """
        import json
        for i in range(3):
            print(json.dumps({"case": i, "value": 6, "passed": True}))
        print("L")
        print("ALL TESTS PASSED")
        def mul(a, b):
            return None
    """
    assert sb.run_tests(dedent(code), "mul", CASES).passed == 0


def test_forging_the_result_channel_fails(sb):
    # The candidate finds the harness' nonce and result fd, writes a guess for every case and exits.
    code = """
        import os, sys, json
        frame = sys._getframe(0)
        while frame and "tests" not in frame.f_locals:
            frame = frame.f_back
        nonce = frame.f_locals["tests"]["nonce"]
        os.write(3, b"L\\n" + b"".join(json.dumps({"nonce": nonce, "case": i, "value": 42}).encode() + b"\\n"
                                       for i in range(3)))
        os._exit(0)
    """
    report = sb.run_tests(dedent(code), "mul", CASES)
    assert report.passed == 0 and [c.output for c in report.cases] == [42, 42, 42]


def test_duplicate_results_for_a_case_fail(sb):
    code = """
        import os, sys, json
        frame = sys._getframe(0)
        while frame and "tests" not in frame.f_locals:
            frame = frame.f_back
        nonce = frame.f_locals["tests"]["nonce"]
        os.write(3, b"L\\n" + json.dumps({"nonce": nonce, "case": 0, "value": 6}).encode() + b"\\n")
        def mul(a, b):
            return a * b
    """
    report = sb.run_tests(dedent(code), "mul", CASES)
    assert [c.passed for c in report.cases] == [False, True, True]


def test_junk_on_the_result_channel_costs_the_host_a_bounded_number_of_parses(sb, monkeypatch):
    # Megabytes of empty records on the result pipe: the host parses a few lines past one per case, not a million.
    code = """
        import os
        def mul(a, b):
            os.write(3, b"{}\\n" * 1_000_000)
            return a * b
    """
    parses = []
    real_loads = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **k: parses.append(text == b"{}") or real_loads(text, **k))  # counts, parses as before
    sb.run_tests(dedent(code), "mul", CASES)
    assert 0 < sum(parses) <= len(CASES) + SPARE_RESULT_LINES


def test_deeply_nested_results_are_refused_not_returned(sb):
    # A forged record per case whose value nests 900 lists (json reads it; comparing or pickling it later would not).
    code = """
        import os, sys
        frame = sys._getframe(0)
        while frame and "tests" not in frame.f_locals:
            frame = frame.f_back
        nonce = frame.f_locals["tests"]["nonce"]
        deep = "[" * 900 + "6" + "]" * 900
        os.write(3, b"L\\n" + "".join(f'{{"nonce": "{nonce}", "case": {i}, "value": {deep}}}\\n' for i in range(3)).encode())
        os._exit(0)
    """
    report = sb.run_tests(dedent(code), "mul", CASES)
    assert report.passed == 0 and [c.output for c in report.cases] == [None, None, None]
    assert all(c.error.startswith("no result") for c in report.cases)


def test_a_descriptor_cannot_name_the_supervisor_for_its_signals(sb):
    # F_SETOWN + F_SETSIG + O_ASYNC would have the kernel send SIGSTOP (or SIGIO, or SIGKILL) to the supervisor when a
    # pipe becomes readable, with no kill call for seccomp to see; stopped, it let a 3.5 s solution pass a 2 s clock.
    code = """
        import fcntl, os, signal
        r, w = os.pipe()
        for command, value in ((fcntl.F_SETOWN, os.getppid()), (10, signal.SIGSTOP)):  # 10: F_SETSIG
            try:
                fcntl.fcntl(r, command, value)
                print("allowed", command)
            except PermissionError:
                print("refused", command)
        try:
            fcntl.ioctl(r, 0x8901, os.getppid().to_bytes(4, "little"))  # FIOSETOWN
            print("allowed ioctl")
        except PermissionError:
            print("refused ioctl")
    """
    assert run(sb, code).stdout == f"refused {fcntl.F_SETOWN}\nrefused 10\nrefused ioctl\n"


def test_a_supervisor_stopped_from_outside_does_not_get_a_late_result_graded(sb):
    # Whatever stops the supervisor (a route nobody named yet; here the host's SIGSTOP), the host's own clock decides:
    # results that reach it after the wall timeout are never graded, and the worker is replaced.
    code = """
        import time
        def mul(a, b):
            time.sleep(0.4)
            return a * b
    """

    def stop_the_supervisors() -> None:
        time.sleep(0.3)
        stopped = supervisors(sb)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(sb.wall_timeout_s + 0.5)
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)

    stopper = threading.Thread(target=stop_the_supervisors)
    stopper.start()
    report = sb.run_tests(dedent(code), "mul", CASES)
    stopper.join()
    assert report.passed == 0 and report.execution.timed_out, report
    assert sb.run_tests(dedent(code), "mul", CASES).passed == 3  # the replaced worker grades the next one


def test_system_calls_off_the_allow_list_fail_as_if_the_kernel_had_none(sb):
    # memfd_secret, cachestat, statmount, listmount, mseal, and a number no kernel has yet: ENOSYS, never the kernel
    code = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        for nr in (447, 451, 457, 458, 462, 999):
            print(nr, libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno())
    """
    assert run(sb, code).stdout.split("\n")[:-1] == [f"{nr} -1 38" for nr in (447, 451, 457, 458, 462, 999)]


def test_page_cache_sync_lock_notification_and_dumpable_calls_are_refused(sb):
    code = """
        import ctypes, fcntl, mmap, os
        libc = ctypes.CDLL(None, use_errno=True)
        shared = os.open("/usr/lib/os-release" if os.path.exists("/usr/lib/os-release") else "/etc/hostname", os.O_RDONLY)
        def errno_of(call):
            try:
                call()
                return 0
            except OSError as e:
                return e.errno
        print("fadvise", errno_of(lambda: os.posix_fadvise(shared, 0, 0, os.POSIX_FADV_DONTNEED)))
        print("flock", errno_of(lambda: fcntl.flock(shared, fcntl.LOCK_EX)))
        m = mmap.mmap(-1, 4096)
        vec = ctypes.create_string_buffer(1)
        address = ctypes.addressof(ctypes.c_char.from_buffer(m))
        print("mincore", libc.mincore(ctypes.c_void_p(address), 4096, vec), ctypes.get_errno())
        for name, nr in (("sync", 162), ("syncfs", 306), ("inotify_init1", 294), ("fanotify_init", 300)):
            print(name, libc.syscall(nr, 0, 0), ctypes.get_errno())
        print("dumpable", libc.prctl(4, 1, 0, 0, 0), ctypes.get_errno())
        print("oom", errno_of(lambda: open("/proc/self/oom_score_adj", "w").write("0")))
    """
    lines = run(sb, code).stdout.splitlines()
    assert lines == [
        "fadvise 1", "flock 1", "mincore -1 1", "sync -1 1", "syncfs -1 1", "inotify_init1 -1 1", "fanotify_init -1 1", "dumpable -1 1",
        "oom 13",
    ], lines  # fmt: skip


def test_the_standard_library_still_works_under_the_allow_list(sb):
    # An honest program touching what solutions use: threads, a subprocess, files and copies in /tmp, sqlite, asyncio,
    # sockets between its own processes, select, time, randomness, hashing, compression, decimal, regex.
    code = """
        import asyncio, decimal, hashlib, json, os, random, re, select, shutil, socket, sqlite3, subprocess, sys
        import tempfile, threading, time, zlib
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(lambda x: x * x, range(8))) == [x * x for x in range(8)]
        out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=20)
        assert out.stdout == "42\\n", out
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.txt")
            with open(path, "w") as f:
                f.write("x" * 1000)
            shutil.copy2(path, path + ".bak")
            os.utime(path, None)
            db = sqlite3.connect(os.path.join(d, "t.db"))
            db.execute("create table t (x)")
            db.executemany("insert into t values (?)", [(i,) for i in range(100)])
            db.commit()
            assert db.execute("select sum(x) from t").fetchone() == (4950,)
        async def main():
            await asyncio.sleep(0.01)
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
            return await proc.wait()
        assert asyncio.run(main()) == 0
        a, b = socket.socketpair()
        a.sendall(b"ping")
        assert select.select([b], [], [], 1)[0] and b.recv(4) == b"ping"
        time.sleep(0.01)
        assert len(os.urandom(16)) == 16 and random.SystemRandom().random() < 1
        assert hashlib.sha256(b"x").hexdigest() and zlib.decompress(zlib.compress(b"y" * 100)) == b"y" * 100
        assert decimal.Decimal("1.1") + decimal.Decimal("2.2") == decimal.Decimal("3.3") and re.fullmatch(r"a+", "aaa")
        print("ok", json.dumps([os.getpid() > 0, threading.active_count()]))
    """
    r = run(sb, code)
    assert r.stdout.startswith("ok") and r.exit_code == 0, (r.stdout, r.stderr)


def test_the_execution_cannot_reopen_its_channels_to_read_them_before_its_supervisor(sb):
    # A pipe's end reopens through /proc/self/fd for reading: the execution could read its own output (or hidden
    # arguments on their way) before the supervisor, or leave the supervisor blocked on an emptied pipe.
    code = """
        import os
        for fd in range(5):
            for mode in (os.O_RDONLY, os.O_WRONLY):
                try:
                    os.close(os.open(f"/proc/self/fd/{fd}", mode))
                    print(fd, mode, "reopened")
                except OSError as e:
                    print(fd, mode, e.errno)
        def mul(a, b):
            return a * b
    """
    report = sb.run_tests(dedent(code), "mul", CASES)
    assert report.passed == 3 and report.execution.stdout.split("\n")[:-1] == [f"{fd} {mode} 6" for fd in range(5) for mode in (0, 1)]


def test_cpu_time_is_limited_for_the_execution_as_a_whole():
    # Three children spinning 0.6 s each stay under the per-process CPU limit (1 s) and the wall clock (20 s: a loaded
    # machine must not end it first); together they spend 1.8 s of CPU, past the execution's 1 s, so the supervisor
    # ends the execution before it prints.
    code = """
        import os, time
        def spin(seconds):
            end = time.process_time() + seconds
            while time.process_time() < end:
                pass
        kids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                spin(0.6)
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        print("done")
    """
    with Sandbox(workers=1, cpu_seconds=1, memory_mb=256, wall_timeout_s=20.0, processes=16) as sb:
        r = run(sb, code)
    assert r.timed_out and r.stdout == "" and r.wall_s < sb.wall_timeout_s, r


def test_inode_flags_that_would_survive_the_wipe_cannot_be_set(sb):
    # FS_NODUMP_FL / FS_NOATIME_FL on the private roots themselves (the wipe empties them, it does not remake them)
    code = """
        import fcntl, os, struct
        for root in ("/tmp", "/dev/shm"):
            fd = os.open(root, os.O_RDONLY)
            for command in (0x40086602, 0x401C5820):  # FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR
                try:
                    fcntl.ioctl(fd, command, struct.pack("q", 0x40) if command == 0x40086602 else bytes(28))
                    print(root, "set")
                except OSError as e:
                    print(root, e.errno)
    """
    assert run(sb, code).stdout == "/tmp 1\n/tmp 1\n/dev/shm 1\n/dev/shm 1\n"


def test_monkeypatching_the_harness_fails(sb):
    code = """
        import builtins, json, os, sys
        json.dumps = lambda *a, **k: '{"case": 0, "value": 6}'
        json.loads = lambda *a, **k: [[2, 3], [4, 5], [7, 0]]
        os.write = lambda fd, data: len(data)
        builtins.print = lambda *a, **k: None
        sys.stdout = open(os.devnull, "w")
        main = sys.modules["__main__"]
        for name in dir(main):
            if callable(getattr(main, name, None)) and not name.startswith("__"):
                try:
                    setattr(main, name, lambda *a, **k: None)
                except Exception:
                    pass
        def mul(a, b):
            return -1
    """
    assert sb.run_tests(dedent(code), "mul", CASES).passed == 0


def test_unserialisable_results_fail(sb):
    code = "def mul(a, b):\n    return {1, 2} if a == 2 else (lambda: 0) if a == 4 else float('nan')\n"
    report = sb.run_tests(code, "mul", CASES)
    assert report.passed == 0
    assert report.cases[0].error.startswith("TypeError")


# --- after the battery --------------------------------------------------------------------------------------------


def test_zz_no_sandbox_process_survives_close(sb):
    assert stray_processes(sb) == []
    namespaces = set(jail_namespaces(sb).values())
    workers = sb.worker_pids()
    assert len(namespaces) == sb.workers and processes_in(namespaces)
    sb.close()
    deadline = time.monotonic() + 5
    while (left := processes_in(namespaces) + [p for p in workers if Path(f"/proc/{p}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []
