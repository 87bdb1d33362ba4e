"""StopSignals with real signals sent to this process: the first reaches the loop as a stop, a later one
as a stop at once; before a loop is attached the first is remembered and a second interrupts; the
previous handlers come back."""

import asyncio
import os
import signal
import time

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
