"""Failure modes: no bubblewrap, no user namespaces, the explicit weaker mode, and lost workers being replaced."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest

from flywheel.sandbox import Sandbox, SandboxUnavailable, jail, pool


@pytest.fixture
def fake_path(monkeypatch):
    """An empty PATH directory (world-readable: bwrap runs as jail.HOST_ID); the bubblewrap check is re-run."""
    path = Path(tempfile.mkdtemp())
    path.chmod(0o755)
    monkeypatch.setenv("PATH", str(path))
    jail.check_bubblewrap.cache_clear()
    yield path
    jail.check_bubblewrap.cache_clear()
    shutil.rmtree(path)


def test_missing_bubblewrap_is_reported(fake_path):
    with pytest.raises(SandboxUnavailable, match=r"^bubblewrap \(bwrap\) is not installed; .*apt-get install bubblewrap`\.$"):
        Sandbox(workers=1).start()


def test_unusable_user_namespaces_are_reported(fake_path):
    fake = fake_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXOTH | stat.S_IROTH)
    with pytest.raises(SandboxUnavailable, match=r"user namespaces .*No permissions.*apt-get install bubblewrap`\.$"):
        Sandbox(workers=1).start()


def test_rlimits_only_mode_is_explicit_and_warns(caplog):
    with pytest.raises(ValueError):
        Sandbox(isolation="none")
    with caplog.at_level(logging.WARNING, logger="flywheel.sandbox.core"):
        with Sandbox(workers=1, isolation="rlimits-only", wall_timeout_s=2, cpu_seconds=1) as sb:
            r = sb.run("import os, socket\nprint(os.getuid() if os.getuid() else 'root')\nsocket.socket(socket.AF_INET)")
            assert "[Errno 97]" in r.stderr and r.exit_code == 1  # seccomp: AF_UNIX sockets only
            assert r.stdout == ("65534\n" if os.geteuid() == 0 else f"{os.geteuid()}\n")
            assert sb.run_tests("def f(x):\n    return x * 2\n", "f", [((2,), 4), ((3,), 7)]).passed == 1
            assert sb.run("import os\nos.kill(-1, 9)").exit_code == 1
            r = sb.run("import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(60)\nprint(pid)")
            assert not os.path.exists(f"/proc/{int(r.stdout)}")  # killed and reaped before the reply
    assert "rlimits-only" in caplog.text


def _settled(worker: int) -> list[int]:
    """The worker's processes once it is ready for a request: zygote, supervisor, the supervisor's waiting child.
    Ready means a chain of exactly three live (not zombie) processes, unchanged over 50 ms: a count alone also
    matches the moment a finished supervisor is being reaped while the next one forks."""

    def chain() -> list[int] | None:
        found = pool._descendants(worker)
        if len(found) != 3:
            return None
        try:
            stats = [Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split() for pid in found]
        except OSError:
            return None
        parents_ok = [int(st[1]) for st in stats] == [worker, *found[:2]]
        return found if parents_ok and all(st[0] != b"Z" for st in stats) else None

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (first := chain()) is not None:
            time.sleep(0.05)
            if chain() == first:
                return first
        time.sleep(0.01)
    raise AssertionError(f"worker {worker} never settled: {pool._descendants(worker)}")


def test_dead_and_wedged_workers_are_replaced(monkeypatch):
    monkeypatch.setattr(pool, "_REPLY_GRACE_S", 0.5)
    monkeypatch.setattr(pool, "_CLEAN_TIMEOUT_S", 0.5)
    with Sandbox(workers=1, wall_timeout_s=1) as sb:
        (first,) = sb.worker_pids()
        zygote = pool._descendants(first)[0]
        os.kill(zygote, signal.SIGKILL)  # the zygote dies
        lost = sb.run("print(1)")
        assert lost.exit_code is None and lost.error
        (second,) = sb.worker_pids()
        assert second != first and sb.run("print(1)").stdout == "1\n"
        for pid in _settled(second):  # the zygote, its supervisor and the waiting child hang
            os.kill(pid, signal.SIGSTOP)
        assert sb.run("print(1)").error
        (third,) = sb.worker_pids()
        assert third != second and sb.run("print(2)").stdout == "2\n"
        os.kill(_settled(third)[0], signal.SIGSTOP)  # only the zygote hangs: the reply comes, "clean" not
        assert sb.run("print(3)").stdout == "3\n"
        assert sb.run("print(4)").stdout == "4\n"  # on a fresh worker: the unconfirmed one was replaced first
        (fourth,) = sb.worker_pids()
        assert fourth != third
        assert not any(os.path.exists(f"/proc/{pid}") for pid in (first, second, third))


def test_a_worker_whose_own_state_changed_is_replaced():
    """As if an execution had got past seccomp: the host itself lowers the zygote's priority, then its CPU affinity
    (prlimit on another process needs CAP_SYS_RESOURCE, which this CI's root lacks). The execution under way is
    unaffected (its supervisor was forked before); the worker is retired."""
    with Sandbox(workers=1, wall_timeout_s=2) as sb:
        for change in (lambda z: os.setpriority(os.PRIO_PROCESS, z, 10), lambda z: os.sched_setaffinity(z, {min(os.sched_getaffinity(z))})):
            (before,) = sb.worker_pids()
            change(_settled(before)[0])
            assert sb.run("open('f', 'w').write('x' * 100)\nprint('wrote')").stdout == "wrote\n"
            assert sb.run("import os\nopen('f', 'w').write('x' * 100)\nprint(os.nice(0))").stdout == "0\n"
            (after,) = sb.worker_pids()
            assert after != before and not os.path.exists(f"/proc/{before}")
