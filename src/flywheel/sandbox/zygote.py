"""Long-lived worker that runs one execution at a time (runs with /usr/bin/python3, standard library only).

Usage: ``python3 -I -B zygote.py jail DEVICES|- - CGROUP_FDS`` inside bubblewrap (it is PID 1 of the jail's PID
namespace; DEVICES: the names of the jail's own /dev nodes, comma-separated, reset with every wipe),
or ``python3 -I -B zygote.py host SCRATCH_DIR UID|- CGROUP_FDS`` for the weaker rlimits-only mode.

Threat: candidate code that tries to read an earlier execution's data (requests, hidden-test arguments, returned
values, files), to leave something for a later one, or to change the worker that later executions fork from.

Three generations of processes, so that no execution inherits another's data:
- the zygote (Z) never reads a request, a reply or a name a candidate chose: its memory holds only this module's
  state. It forks one *supervisor* at a time and waits for it.
- the supervisor (S), a fresh fork of Z, serves exactly one request. It forks the candidate's process (C) ahead
  of the request (C waits for it on a pipe, so neither fork is on the request's path), reads the request from
  fd 0, hands it to C, relays stdin and call arguments, collects capped outputs, kills and reaps every process of
  the execution, sends the reply on fd 1, wipes the writable places (completely, or it exits with an error: a
  wipe is never silently partial), and exits.
- C, while it waits, sets its OOM score to the highest, drops every other descriptor, the environment and (host
  mode) its uid, and installs the seccomp filter (seccomp.py); then it reads its request, applies the request's
  rlimits (limits.py), and runs the candidate code.
Z joins the worker's cgroups (fds in CGROUP_FDS; cgroup.py) at start, so S and C are born in them.
C and its children are forks of S made before S read anything, and C receives only its own request.

Protocol on fds 0 (requests) and 1 (replies), frames from ``wire``: Z sends ``{"ready": true}``; per request frame
(JSON: code, stdin, limits, wall_timeout_s, output_limit, result_limit, tests) S sends the reply, then Z sends
``{"clean": true}`` once it has checked that the execution left nothing behind: S exited normally (its wipe
completed), no process is left in the jail, the writable places are empty with their original mode and no
extended attributes, and Z's own limits, priority, scheduling, CPU affinity, I/O priority, cgroups and OOM score
are what they were at start. Otherwise Z exits instead. The host takes a worker for a new execution only after
its "clean" (pool.py), and replaces it when that does not come. For a test request, S reads the call arguments
(a second frame) only after forking C, relays them once C writes to its result pipe (after the candidate code
ran, unless the candidate writes there itself), and zeroes its buffer; S computes no verdict.

C cannot change S or Z: seccomp refuses prlimit, setpriority, ioprio_set and sched_set* on any process but the
caller, and signals to S and to PID 1; Z and S are not dumpable (no /proc/<pid>/mem, no ptrace); Z is PID 1 of
the jail (the kernel drops signals to it from inside anyway). Should S die or hang all the same, that execution
is lost and the worker replaced (Z exits; the host's reply deadline).

Not covered: counters the kernel keeps per jail and that an execution can advance (the PID counter of the jail's
PID namespace, tmpfs inode numbers), and timing (page cache, CPU), can carry a few bits from a cooperating earlier
execution on the same worker to a later one.
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import fcntl
import io
import json
import os
import resource
import secrets
import select
import shutil
import signal
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import limits  # noqa: E402
import seccomp  # noqa: E402
import wire  # noqa: E402

del sys.path[0]

# Warm the modules candidate code most often imports: the fork shares them.
import bisect  # noqa: E401,E402,F401

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}
_EOF = 100  # a supervisor's exit code when the request pipe is closed
_TICKS = os.sysconf("SC_CLK_TCK")
_CPU_CHECK_S = 0.1  # how often the supervisor sums the execution's CPU time while nothing else happens
_ROOT_MODE = 0o755
_LOADED = b"L\n"  # first bytes a test child writes on its result pipe, once the candidate code has run
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
_CHUNK = 1 << 16
_FLOOD_FACTOR = 16  # an execution printing more than this many times the output cap is killed


class _Context:
    """The zygote's mode (jail or host), where executions get their private dirs, and the seccomp program."""

    def __init__(self, argv: list[str]) -> None:
        self.jail = argv[1] == "jail"
        self.scratch_root = "/tmp" if self.jail else argv[2]
        self.wipe_roots = ["/tmp", "/dev/shm"] if self.jail else [self.scratch_root]
        # the jail's own device nodes (jail.private_devices), reset with every wipe
        self.devices = [f"/dev/{name}" for name in argv[2].split(",")] if self.jail and argv[2] != "-" else []
        self.uid = int(argv[3]) if argv[3] != "-" else None
        self.cgroup_fds = [int(fd) for fd in argv[4].split(",") if fd]
        self.filter = seccomp.build_filter()  # each supervisor adds itself as the guarded PID


_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def _exit_code(exc: SystemExit) -> int:
    """The process exit code Python gives a SystemExit (a message is printed and gives 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _read_to_end(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _child(ctx: _Context, scratch: str, pipes: _Pipes) -> None:
    """In the child, forked before the request arrives: confine (all that does not depend on the request comes
    first, off the request's path), read the request, run the candidate code, then (test mode) call the function
    per case.

    The pipes' child ends become 0..4: stdin, stdout, stderr, and in test mode result (write end) and args (read
    end); every other fd is closed.
    """
    os.setsid()
    _prctl(_PR_SET_DUMPABLE, 1)  # for a moment: /proc/self/oom_score_adj is ours to write only while dumpable
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # the OOM killer takes the execution's processes before the zygote or the supervisor
    _prctl(_PR_SET_DUMPABLE, 0)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in [*pipes.child_fds(), pipes.ends["request"][0]]]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(high), os.sysconf("SC_OPEN_MAX"))
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update(_ENV, HOME=scratch, TMPDIR=scratch)
    if ctx.uid is not None:
        os.setgroups([])
        os.setgid(ctx.uid)
        os.setuid(ctx.uid)
    seccomp.install(ctx.filter)
    req = json.loads(_read_to_end(5))
    os.close(5)
    if req["tests"] is None:
        os.close(3)
        os.close(4)
    limits.apply(req["limits"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True)
    tests = req["tests"]
    write, dumps, loads, read = os.write, json.dumps, json.loads, os.read
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    code = 0
    try:
        exec(compile(req["code"], "<candidate>", "exec"), namespace)
        if tests is not None:
            write(3, _LOADED)
            chunks = []
            while chunk := read(4, _CHUNK):
                chunks.append(chunk)
            fn = namespace.get(tests["function"])
            for i, args in enumerate(loads(b"".join(chunks))):
                try:
                    line = dumps({"nonce": tests["nonce"], "case": i, "value": fn(*args)})
                except BaseException as exc:  # a case's failure is that case's result, SystemExit included
                    line = dumps({"nonce": tests["nonce"], "case": i, "error": f"{type(exc).__name__}: {exc}"[:500]})
                write(3, line.encode() + b"\n")
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # the traceback as Python prints it, without this harness frame
        traceback.print_exception(exc.with_traceback(exc.__traceback__.tb_next))
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _children() -> list[int]:
    """Our live children (orphans of the execution are re-parented to us: we are a child subreaper)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == me:
                        found.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return found


def _reap_everything(ctx: _Context) -> None:
    """SIGKILL every other process of the execution and reap them all. In the jail, kill(-1) reaches every process
    of the PID namespace but init and us; in host mode, our children (repeated: orphans keep arriving)."""
    while True:
        for target in [-1] if ctx.jail else _children():
            try:
                os.kill(target, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _kill_all(ctx: _Context, pid: int) -> int:
    """SIGKILL the child and every other process of the execution, reap them all; return the child's wait status."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    _reap_everything(ctx)
    return status


def _wipe(root: str) -> None:
    """Delete everything under ``root`` and reset the root itself (mode, extended attributes, times), or raise
    OSError: a wipe that cannot finish (descriptors, depth, permissions) is never silently partial."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one descriptor per level of a deep tree
    os.chmod(root, 0o700)
    if not _remove_all(root, []):  # the candidate may have made directories unreadable: open them up, retry
        for dirpath, dirnames, _ in os.walk(root):
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
        failures = []
        if not _remove_all(root, failures):
            raise OSError(f"the wipe of {root} is incomplete: {failures[:1]}")
    for name in os.listxattr(root):
        os.removexattr(root, name)
    os.chmod(root, _ROOT_MODE)
    os.utime(root, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _reset_devices(nodes: list[str]) -> None:
    """Mode 0666 and times 0 for each of the jail's own device nodes, as the host made them (or raise OSError)."""
    for node in nodes:
        os.chmod(node, 0o666)
        os.utime(node, (0, 0))


def _remove_all(root: str, failures: list) -> bool:
    """Remove every entry of ``root``; whether it is empty afterwards (errors go to ``failures``)."""
    for entry in os.scandir(root):
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, onerror=lambda *err: failures.append(err[2]))
            else:
                os.unlink(entry.path)
        except OSError as exc:
            failures.append(exc)
    return not failures and not os.listdir(root)


def _is_clean(root: str) -> bool:
    """Empty, no extended attributes, the mode and modification time the wipe sets."""
    st = os.stat(root)
    return not os.listdir(root) and not os.listxattr(root) and st.st_mode & 0o7777 == _ROOT_MODE and st.st_mtime == 0


def _own_state() -> tuple:
    """What an execution must not be able to change about the zygote (checked after each one)."""
    rlimits = tuple(resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_"))
    with open("/proc/self/cgroup") as cg, open("/proc/self/oom_score_adj") as oom:
        files = cg.read(), oom.read()
    ioprio = _libc.syscall(_IOPRIO_GET.get(os.uname().machine, -1), 1, 0)
    return (
        rlimits,
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        os.sched_getparam(0).sched_priority,
        sorted(os.sched_getaffinity(0)),
        ioprio,
        files,
    )


def _channel() -> tuple[int, int]:
    """(read end, write end) of a one-way stream, as ``os.pipe`` gives, but a socket pair: a pipe's end can be
    reopened through /proc/self/fd, for reading the execution's own output before its supervisor does (or stalling
    the supervisor on a read), while opening a socket's /proc link fails (ENXIO)."""
    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    reader.shutdown(socket.SHUT_WR)
    writer.shutdown(socket.SHUT_RD)
    return reader.detach(), writer.detach()


class _Pipes:
    """The one-way channels of one execution (``_channel``), each end closed exactly once; "request" carries the
    request to the child."""

    def __init__(self) -> None:
        self.ends = {name: _channel() for name in ("stdin", "stdout", "stderr", "result", "args", "request")}
        self.open = {fd for pair in self.ends.values() for fd in pair}

    def child_fds(self, tests: bool = True) -> list[int]:
        e = self.ends
        fds = [e["stdin"][0], e["stdout"][1], e["stderr"][1]]
        return fds + ([e["result"][1], e["args"][0]] if tests else [])

    def close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self.open:
                self.open.discard(fd)
                os.close(fd)


def _fork_child(ctx: _Context) -> tuple[int, _Pipes]:
    """Fork the execution's process ahead of its request, in its private directory; it waits for the request."""
    scratch = os.path.join(ctx.scratch_root, "run-" + secrets.token_hex(8))
    os.mkdir(scratch, 0o700)
    if ctx.uid is not None:
        os.chown(scratch, ctx.uid, ctx.uid)
    pipes = _Pipes()
    pid = os.fork()
    if pid == 0:
        try:
            _child(ctx, scratch, pipes)
        finally:
            os._exit(127)
    pipes.close(*pipes.child_fds(), pipes.ends["request"][0])
    return pid, pipes


def _execute(ctx: _Context, frame: bytearray, pid: int, pipes: _Pipes) -> dict:
    """Hand the request to the waiting child, supervise it, kill and reap every process of the execution."""
    req = json.loads(frame)
    tests = req["tests"] is not None
    caps = {"stdout": int(req["output_limit"]), "stderr": int(req["output_limit"]), "result": int(req["result_limit"])}
    streams = _Streams(caps if tests else {n: caps[n] for n in ("stdout", "stderr")})
    args = None
    try:
        try:
            wire.send_raw(pipes.ends["request"][1], frame)
            pipes.close(pipes.ends["request"][1])
            start = time.monotonic()
            args = wire.recv(0) if tests else None  # read only after the fork: never in a child's memory
            timed_out, end = _supervise(req, pid, pipes, streams, args, start)
        finally:
            status = _kill_all(ctx, pid)
            if args is not None:
                args[:] = bytes(len(args))
        outputs = streams.drain(pipes)
    finally:
        pipes.close(*list(pipes.open))
    return {"exit_code": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "wall_s": end - start, **outputs}


class _Streams:
    """Capped buffers for the child's output pipes (stdout, stderr, and in test mode the result pipe)."""

    def __init__(self, caps: dict[str, int]) -> None:
        self.caps = caps
        self.data = {name: bytearray() for name in caps}
        self.seen = {name: 0 for name in caps}

    def add(self, name: str, chunk: bytes) -> None:
        self.seen[name] += len(chunk)
        self.data[name] += chunk[: max(0, self.caps[name] - len(self.data[name]))]

    def flooded(self) -> bool:
        return self.seen["stdout"] + self.seen["stderr"] > _FLOOD_FACTOR * self.caps["stdout"]

    def drain(self, pipes: _Pipes) -> dict:
        """Once every writer is dead: read what the pipes still hold; the outputs encoded for the reply."""
        for name in self.data:
            fd = pipes.ends[name][0]
            os.set_blocking(fd, False)
            try:
                while chunk := os.read(fd, _CHUNK):
                    self.add(name, chunk)
            except BlockingIOError:
                pass
        out = {name: base64.b64encode(bytes(buf)).decode() for name, buf in self.data.items()}
        out.update({f"{n}_truncated": self.seen[n] > len(self.data[n]) for n in ("stdout", "stderr")})
        return out


def _execution_cpu(supervisor: int) -> float:
    """CPU seconds of every process descending from the supervisor, with what each reaped: an orphan comes to the
    supervisor (a subreaper), which reaps it only once the execution is over, so it stays counted as a zombie."""
    parents, spent = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            parents[int(name)] = int(fields[1])
            spent[int(name)] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    total, frontier = 0, [supervisor]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        total += sum(spent[pid] for pid in frontier)
    return total / _TICKS


def _supervise(req: dict, pid: int, pipes: _Pipes, streams: _Streams, args: bytearray | None, start: float) -> tuple[bool, float]:
    """Relay stdin (and the args once the child reports its code has run), collect capped outputs until the child
    exits, the wall clock or the execution's CPU time (all its processes together, ``_execution_cpu``, checked every
    ``_CPU_CHECK_S``) runs out, or the output floods. Returns (timed_out, end time)."""
    deadline = start + float(req["wall_timeout_s"])
    me, cpu_limit = os.getpid(), float(req["limits"]["cpu_seconds"])
    cpu_start, cpu_check = _execution_cpu(me), start + _CPU_CHECK_S
    e = pipes.ends
    args_fd = e["args"][1] if args is not None else None
    readers = {e[name][0]: name for name in streams.data}
    writers = {e["stdin"][1]: memoryview(req["stdin"].encode())}
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    for fd in readers:
        poller.register(fd, select.POLLIN)
    for fd in (e["stdin"][1], args_fd):
        if fd is not None:
            os.set_blocking(fd, False)
    poller.register(e["stdin"][1], select.POLLOUT)
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            events = poller.poll(max(0.0, min(remaining, cpu_check - time.monotonic())) * 1000)
            if (now := time.monotonic()) >= cpu_check:
                if _execution_cpu(me) - cpu_start > cpu_limit:
                    return True, now
                cpu_check = now + _CPU_CHECK_S
            if any(fd == pidfd for fd, _ in events):  # an exit seen after the deadline (this process was stopped) is late
                end = time.monotonic()
                return end > deadline, end
            for fd, _ in events:
                if fd in readers:
                    chunk = os.read(fd, _CHUNK)
                    if not chunk:
                        poller.unregister(fd)
                        continue
                    streams.add(readers[fd], chunk)
                    if readers[fd] == "result" and args_fd is not None and args_fd not in writers:
                        writers[args_fd] = memoryview(args)
                        poller.register(args_fd, select.POLLOUT)
                elif fd in writers:
                    try:
                        writers[fd] = writers[fd][os.write(fd, writers[fd]) :]
                    except BrokenPipeError:
                        writers[fd] = writers[fd][:0]
                    if not writers[fd]:
                        poller.unregister(fd)
                        pipes.close(fd)
            if streams.flooded():
                return False, time.monotonic()
        return True, time.monotonic()
    finally:
        os.close(pidfd)


def _serve(ctx: _Context) -> int:
    """The supervisor: one request, one reply; its exit code tells the zygote how it went. The execution's process
    is forked before the request is read, so that the fork is not on the request's path."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    ctx.filter = seccomp.guarded(ctx.filter, os.getpid())
    pid, pipes = _fork_child(ctx)
    frame = wire.recv(0)
    if frame is None:
        _kill_all(ctx, pid)
        return _EOF
    try:
        reply, code = _execute(ctx, frame, pid, pipes), 0
    except Exception:
        reply, code = {"error": traceback.format_exc(limit=3)[-2000:]}, 1
    wire.send_json(1, reply)  # every process of the execution is dead: its outputs are complete
    try:
        for root in ctx.wipe_roots:
            _wipe(root)
        _reset_devices(ctx.devices)
    except Exception:  # RecursionError too: the zygote, seeing code 1, retires the worker
        code = 1
    return code


def _fork_supervisor(ctx: _Context) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _serve(ctx)
        finally:
            os._exit(code)
    return pid


def main(argv: list[str]) -> None:
    ctx = _Context(argv)
    for fd in ctx.cgroup_fds:  # join the worker's capped groups ("0": this process): everything forked later is born
        os.write(fd, b"0")  # in them; then the descriptors go
        os.close(fd)
    _prctl(_PR_SET_DUMPABLE, 0)  # no /proc/<pid>/mem, fd, environ access to us from the children
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for fd in (0, 1):
        os.set_inheritable(fd, False)
    for root in ctx.wipe_roots:  # the first execution finds the roots as every later one will
        _wipe(root)
    baseline = _own_state()
    supervisor = _fork_supervisor(ctx)
    wire.send_json(1, {"ready": True})
    while True:
        _, status = os.waitpid(supervisor, 0)
        if os.waitstatus_to_exitcode(status) == _EOF:
            return
        _reap_everything(ctx)
        if status != 0 or _own_state() != baseline or not all(_is_clean(root) for root in ctx.wipe_roots):
            sys.exit(3)  # the host sees the end of the pipe instead of "clean" and replaces this worker
        supervisor = _fork_supervisor(ctx)  # ready before the host sends the next request
        wire.send_json(1, {"clean": True})


if __name__ == "__main__":
    main(sys.argv)
