"""Preemption: SIGTERM and SIGINT (what Kubernetes, Slurm and job runners send, and Ctrl-C), and SIGUSR1
(what ``sbatch --signal=USR1@SECONDS`` sends ahead of a time limit, and what mpirun forwards to every rank
at once) ask a run to stop at its next safe point; a second signal stops it at once.

Who handled them before: ``ray.init`` replaces the driver's SIGTERM handler with ``sys.exit``, which
raised inside the event loop and ended in Ray's core worker aborting (exit 134, an abseil stack dump);
SIGINT met ``asyncio.run``'s own handler, which only cancels the loop's main task once (the run went
on). Ray starts its own processes (GCS, raylet, workers, and through them the engines' processes)
with SIGINT blocked, so a Ctrl-C to the process group reaches the driver alone. ``StopSignals`` takes
the signals over in the driver (again after ``ray.init``; ``asyncio.run`` then leaves SIGINT alone)
and hands them to the loop, which stops at a step boundary (controller.py); the CLI exits with 6.
The whole stop is bounded: a stop still under way ``deadline_s`` after the first signal (a checkpoint
being written, a shutdown that hangs) is cut short, every process this one started is killed, and the
process exits 6 with one line (a half-written checkpoint is skipped at resume).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class Preempted(RuntimeError):
    """A signal stopped the run; ``checkpoint``: the checkpoint to resume from (None when there is none)."""

    def __init__(self, signal_name: str, completed: int, run_dir: Path, checkpoint: Path | None, how: str = "at a step boundary") -> None:
        self.run_dir, self.checkpoint = run_dir, checkpoint
        if checkpoint is None:
            then = "no checkpoint was saved, so start the run again"
        else:
            then = f"checkpoint {checkpoint}: continue with run.resume={run_dir}"
        super().__init__(f"{signal_name} stopped the run {how} after step {completed}; {then}")


class StopSignals:
    """The stop signals (SIGNALS) to this process, while installed: ``asked`` names the first one. On the
    event loop given to ``attach``, ``on_first`` runs at the first and ``on_again`` at any later one;
    with no loop attached, a second signal raises KeyboardInterrupt (start-up is interrupted)."""

    def __init__(self, deadline_s: float | None = None) -> None:
        self.asked: str | None = None
        self.deadline_s = deadline_s
        self.run_dir: Path | None = None  # named by the line of a stop cut short
        self._deadline: threading.Timer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_first: Callable[[], None] = lambda: None
        self._on_again: Callable[[], None] = lambda: None
        self._previous: dict[int, object] = {}

    def install(self) -> StopSignals:
        """Takes the signals over (again: ``ray.init`` replaces SIGTERM's handler); only the main thread can."""
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                previous = signal.signal(number, self._handle)
                self._previous.setdefault(number, previous)
        return self

    def restore(self) -> None:
        if self._deadline:
            self._deadline.cancel()
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous = {}

    def attach(self, loop: asyncio.AbstractEventLoop, on_first: Callable[[], None], on_again: Callable[[], None]) -> None:
        """Signals now reach ``loop``; one that came before runs ``on_first`` there at once."""
        self._loop, self._on_first, self._on_again = loop, on_first, on_again
        if self.asked:
            loop.call_soon(on_first)

    def detach(self) -> None:
        self._loop = None

    def _handle(self, number: int, frame) -> None:
        first = self.asked is None
        if first:
            self.asked = signal.Signals(number).name
            if self.deadline_s is not None:
                self._deadline = threading.Timer(self.deadline_s, self._cut_short)
                self._deadline.daemon = True
                self._deadline.start()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._on_first if first else self._on_again)
        elif not first:
            raise KeyboardInterrupt

    def _cut_short(self) -> None:
        """The stop outlasted its deadline: every process this one started is killed, then this one (exit 6)."""
        then = f"continue with run.resume={self.run_dir} (its newest complete checkpoint)" if self.run_dir else "start the run again"
        print(
            f"flywheel: stopped: {self.asked} stopped the run, but the stop outlasted run.stop_timeout_s ({self.deadline_s:g} s), so its processes were killed; {then}",
            file=sys.stderr,
            flush=True,
        )
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone meanwhile
                pass
        os._exit(6)


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found
