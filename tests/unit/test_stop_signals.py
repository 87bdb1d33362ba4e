"""StopSignals with real signals sent to this process: the first reaches the loop as a stop, a later one
as a stop at once; before a loop is attached the first is remembered and a second interrupts; the
previous handlers come back."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flywheel.preemption import StopSignals


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGUSR1])
def test_the_first_signal_asks_a_stop_and_the_second_stops_at_once(first):
    heard: list[str] = []

    async def main(signals: StopSignals) -> None:
        signals.attach(asyncio.get_running_loop(), lambda: heard.append("first"), lambda: heard.append("again"))
        os.kill(os.getpid(), first)
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.05)

    before = [signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)]
    signals = StopSignals().install()
    try:
        asyncio.run(main(signals))
    finally:
        signals.restore()
    assert (signals.asked, heard) == (first.name, ["first", "again"])
    assert [signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)] == before


def test_a_signal_before_the_loop_is_remembered_and_a_second_interrupts():
    heard: list[str] = []
    signals = StopSignals().install()
    try:
        os.kill(os.getpid(), signal.SIGINT)  # during start-up: no loop yet

        async def main() -> None:
            signals.attach(asyncio.get_running_loop(), lambda: heard.append("first"), lambda: heard.append("again"))
            await asyncio.sleep(0.01)
            signals.detach()

        asyncio.run(main())
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # closing, no loop attached: stop at once
            time.sleep(1)  # (the handler runs as soon as os.kill returns)
    finally:
        signals.restore()
    assert (signals.asked, heard) == ("SIGINT", ["first"])


HUNG_STOP = """
import os, signal, subprocess, sys, time
from pathlib import Path
from flywheel.preemption import StopSignals
signals = StopSignals(deadline_s=1.0).install()
signals.run_dir = Path("runs/hung")
child = subprocess.Popen(["bash", "-c", "sleep 20 & wait"], stdout=subprocess.DEVNULL)  # a child with a child, as Ray's raylet and its workers
print(os.getpid(), flush=True)
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGTERM)
if sys.argv[1] == "finishes":
    signals.restore()  # the stop ended in time
time.sleep(3)  # a hung shutdown
print("finished", flush=True)
os.killpg(0, signal.SIGKILL)  # its own session: the child and grandchild too
"""


def _session(sid: int) -> list[int]:
    """The live processes of session ``sid``, zombies left out."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_a_stop_that_outlasts_its_deadline_is_cut_short_with_every_process_it_started():
    run = subprocess.run([sys.executable, "-c", HUNG_STOP, "hangs"], capture_output=True, text=True, timeout=30, start_new_session=True)
    assert run.returncode == 6, run.stderr
    assert run.stderr.strip() == (
        "flywheel: stopped: SIGTERM stopped the run, but the stop outlasted run.stop_timeout_s (1 s), so its processes"
        " were killed; continue with run.resume=runs/hung (its newest complete checkpoint)"
    )
    assert "finished" not in run.stdout
    time.sleep(0.5)  # reaped by init
    assert _session(int(run.stdout.split()[0])) == []  # the child and the grandchild (sleeping 20 s) were killed


def test_a_stop_that_ends_in_time_is_not_cut_short():
    run = subprocess.run([sys.executable, "-c", HUNG_STOP, "finishes"], capture_output=True, text=True, timeout=30, start_new_session=True)
    assert (run.returncode, run.stderr, run.stdout.split()[1]) == (-signal.SIGKILL, "", "finished")
