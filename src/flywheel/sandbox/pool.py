"""Host side of the zygote pool: start, talk to, and replace long-lived zygote processes.

A worker is replaced when it dies, answers late or garbled, or does not confirm after a reply that the execution
left it clean (zygote.py: the zygote then exits). That confirmation is awaited when the worker is next taken, not
before the reply is returned: the reply stands either way, and no execution runs on an unconfirmed worker.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flywheel.sandbox import wire
from flywheel.sandbox.jail import HOST_ENV

_START_TIMEOUT_S = 30.0
_REPLY_GRACE_S = 3.0  # beyond the wall timeout: the supervisor's kill and reap; past it the host kills the worker
_LATE_S = 0.5  # a reply later than the wall timeout plus this (host clock) is a timeout: its results are never graded
_CLEAN_TIMEOUT_S = 10.0  # for the zygote's "clean" frame after a reply


class WorkerLost(RuntimeError):
    """A zygote died, sent something unreadable, or did not answer in time."""


class Worker:
    """One zygote process (bwrap, or python3 in rlimits-only mode) and its request/reply pipes.

    ``pass_fds`` are inherited by the zygote; ``cleanup`` runs once the zygote is gone (its cgroups are removed).
    ``user`` holds Popen's user/group arguments (jail.host_user)."""

    def __init__(
        self, command: list[str], cwd: str, pass_fds: tuple[int, ...] = (), cleanup: Callable[[], None] | None = None, user: dict | None = None
    ) -> None:
        self._cleanup = cleanup
        self.unconfirmed = False
        self.late = False  # it answered past the wall timeout (request): replaced, never reused
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=HOST_ENV,
                cwd=cwd,
                close_fds=True,
                start_new_session=True,
                pass_fds=pass_fds,
                **(user or {}),
            )
        except OSError as exc:
            self._run_cleanup()
            raise WorkerLost(f"the zygote did not start: {exc}") from exc
        try:
            ready = wire.recv(self.process.stdout.fileno(), time.monotonic() + _START_TIMEOUT_S)
            if ready is None or not json.loads(ready).get("ready"):
                raise WorkerLost("the zygote exited before it was ready")
        except (OSError, ValueError, TimeoutError) as exc:
            self.kill()
            raise WorkerLost(f"the zygote did not start: {exc}") from exc
        except WorkerLost:
            self.kill()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def request(self, req: dict[str, Any], args: bytes | None) -> dict[str, Any]:
        """Send one execution (and its call arguments, in a separate frame) and wait for the reply. The zygote's
        word that the execution left the worker clean follows: ``confirm_clean`` reads it."""
        sent = time.monotonic()
        try:
            wire.send_json(self.process.stdin.fileno(), req)
            if args is not None:
                wire.send(self.process.stdin.fileno(), args)
            reply = wire.recv(self.process.stdout.fileno(), sent + req["wall_timeout_s"] + _REPLY_GRACE_S)
        except (OSError, ValueError, TimeoutError, EOFError) as exc:
            raise WorkerLost(f"{type(exc).__name__}: {exc}") from exc
        if reply is None:
            raise WorkerLost("the zygote exited")
        out = json.loads(reply)
        if "error" in out:
            raise WorkerLost(f"the zygote failed: {out['error']}")
        self.unconfirmed = True
        if time.monotonic() - sent > req["wall_timeout_s"] + _LATE_S:  # its supervisor was stopped or starved
            self.late = True
            out.update(timed_out=True, result="")
        return out

    def confirm_clean(self) -> bool:
        """Whether the zygote confirmed that the last execution left the worker clean (False: replace it)."""
        if not self.unconfirmed:
            return True
        try:
            clean = wire.recv(self.process.stdout.fileno(), time.monotonic() + _CLEAN_TIMEOUT_S)
            self.unconfirmed = not (clean is not None and json.loads(clean).get("clean") is True)
        except (OSError, ValueError, TimeoutError, EOFError, AttributeError):
            pass
        return not self.unconfirmed

    def kill(self) -> None:
        """SIGKILL the zygote. A jailed zygote is PID 1 of its namespace (bwrap --die-with-parent passes the kill on):
        its death kills every process of the jail. An unjailed one's descendants are killed first, found in /proc."""
        for pid in [*_descendants(self.process.pid), self.process.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        self._close_pipes()
        self._run_cleanup()

    def _run_cleanup(self) -> None:
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()

    def close(self) -> None:
        """Ask the zygote to exit (end of its request pipe); kill it if it does not within a few seconds."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self._close_pipes()
        self._run_cleanup()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


def _descendants(root: int) -> list[int]:
    """PIDs of every live descendant of ``root``, from /proc (deepest last)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, frontier = [], [root]
    while frontier:
        frontier = [child for pid in frontier for child in children.get(pid, [])]
        found += frontier
    return found


class Pool:
    """``size`` pre-started workers; each execution borrows one, and a lost worker is replaced by a fresh one.

    Workers are started from the pool's own threads, which live as long as the pool: bwrap --die-with-parent
    kills the jail when the *thread* that started it exits.
    """

    def __init__(self, size: int, spawn: Callable[[], Worker]) -> None:
        self._spawner = ThreadPoolExecutor(max_workers=size, thread_name_prefix="sandbox-spawn")
        self._spawn = lambda: self._spawner.submit(spawn).result()
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._all: list[Worker] = []
        self._lock = threading.Lock()
        started = [self._spawner.submit(spawn) for _ in range(size)]
        try:
            for future in started:
                self._add(future.result())
        except BaseException:
            for future in started:
                if future.exception() is None:
                    future.result().kill()
            self._spawner.shutdown()
            raise

    def _add(self, worker: Worker) -> None:
        with self._lock:
            self._all.append(worker)
        self._idle.put(worker)

    def pids(self) -> list[int]:
        """Host PIDs of the workers' top processes."""
        with self._lock:
            return [w.pid for w in self._all]

    def execute(self, req: dict[str, Any], args: bytes | None) -> dict[str, Any]:
        """Run one request on an idle, confirmed-clean worker; a worker that fails is killed, replaced, and
        WorkerLost re-raised; one that does not confirm it is clean is replaced before it is used again."""
        with self._lock:
            if not self._all:
                raise WorkerLost("no worker left in the pool (closed, or replacements failed to start)")
        worker = self._idle.get()
        while not worker.confirm_clean():
            self._replace(worker)
            worker = self._idle.get()
        try:
            reply = worker.request(req, args)
        except WorkerLost:
            self._replace(worker)
            raise
        if worker.late:  # a supervisor that answers late is not trusted with another execution
            self._replace(worker)
        else:
            self._idle.put(worker)
        return reply

    def _replace(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.remove(worker)
        self._add(self._spawn())

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.close()
        self._spawner.shutdown()
