"""The public sandbox: executions through a pool of jailed zygotes, and grading by hidden tests on the host."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flywheel.sandbox import cgroup as cgroups
from flywheel.sandbox import jail
from flywheel.sandbox.jail import SandboxUnavailable
from flywheel.sandbox.pool import Pool, Worker, WorkerLost

log = logging.getLogger(__name__)

_LOADED = b"L\n"


@dataclass(frozen=True)
class SandboxResult:
    """What one execution produced, as collected by the host."""

    stdout: str
    stderr: str
    exit_code: int | None  # negative: killed by that signal; None: the worker was lost (see error)
    timed_out: bool  # the wall clock, or the CPU time of the execution's processes together, ran out
    stdout_truncated: bool
    stderr_truncated: bool
    wall_s: float
    error: str | None = None  # infrastructure failure (the zygote died or hung and was replaced)

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


@dataclass(frozen=True)
class CaseResult:
    """One hidden test: whether it passed, the value the function returned (plain JSON data), or its error."""

    passed: bool
    output: Any = None
    error: str | None = None


@dataclass(frozen=True)
class TestReport:
    """Verdicts of ``Sandbox.run_tests``, computed on the host against expectations the child never saw."""

    __test__ = False  # not a pytest test class

    cases: list[CaseResult]
    execution: SandboxResult

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def same_value(got: Any, expected: Any) -> bool:
    """Equality of JSON data, strict about types: a bool is not a number, an int and a float may be equal."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        return got == expected and not (isinstance(got, float) and math.isnan(got))
    if type(got) is not type(expected):
        return False
    if isinstance(got, list):
        return len(got) == len(expected) and all(same_value(g, e) for g, e in zip(got, expected))
    if isinstance(got, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k]) for k in got)
    return got == expected  # str or None


class Sandbox:
    """Runs untrusted Python code in a pool of pre-started jailed worker processes.

    ``isolation="bubblewrap"`` (default) jails every worker with bubblewrap (namespaces: no network, read-only
    system, private /tmp, own PID namespace) and confines each execution with rlimits and a seccomp filter.
    ``isolation="rlimits-only"`` must be asked for explicitly (it logs a warning): plain subprocesses with rlimits
    and seccomp (children run as user nobody when started as root) but no namespaces, so the host's world-readable
    files, its processes and its /tmp stay reachable.

    Jailed code is never host root: a root caller's jails run as unprivileged host uids, one per worker
    (``jail.claim_host_uid``). Each
    execution's processes together are capped by its worker's cgroup (cgroup.py) at ``memory_mb`` and ``processes``,
    plus room for the worker's zygote and supervisor (``cgroup.worker_caps``).
    ``cgroup="required"`` (default) refuses to start (SandboxUnavailable) where no such group can be made, which is
    usually so for a non-root caller; ``cgroup="best-effort"`` then runs with per-process rlimits only and logs a
    warning. ``protections`` (after start) says what is in force; it is logged at start.

    Use as a context manager: ``with Sandbox(workers=2) as sb: sb.run("print(1)")``. Thread-safe.
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        cpu_seconds: int = 5,
        memory_mb: int = 512,
        wall_timeout_s: float = 10.0,
        processes: int = 32,
        file_size_mb: int = 16,
        open_files: int = 64,
        output_limit_bytes: int = 64 << 10,
        result_limit_bytes: int = 4 << 20,
        tmp_size_mb: int = 64,
        isolation: Literal["bubblewrap", "rlimits-only"] = "bubblewrap",
        cgroup: Literal["required", "best-effort"] = "required",
    ) -> None:
        if isolation not in ("bubblewrap", "rlimits-only"):
            raise ValueError(f"unknown isolation {isolation!r}: 'bubblewrap' or 'rlimits-only'")
        if cgroup not in ("required", "best-effort"):
            raise ValueError(f"unknown cgroup {cgroup!r}: 'required' or 'best-effort'")
        self.cgroup = cgroup
        self.protections: dict[str, Any] = {}
        self._cgroup_version: str | None = None
        self.workers = workers
        self.isolation = isolation
        self.wall_timeout_s = wall_timeout_s
        self.limits = {
            "cpu_seconds": cpu_seconds,
            "memory_mb": memory_mb,
            "processes": processes,
            "file_size_mb": file_size_mb,
            "open_files": open_files,
        }
        self.output_limit_bytes = output_limit_bytes
        self.result_limit_bytes = result_limit_bytes
        self.tmp_size_mb = tmp_size_mb
        self._pool: Pool | None = None
        self._scratch: list[str] = []

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the worker pool; raises SandboxUnavailable when the isolation cannot be set up here."""
        if self._pool is not None:
            return
        jailed = self.isolation == "bubblewrap"
        jail.check_bubblewrap() if jailed else jail.check_python()
        self._cgroup_version = self._check_cgroup()
        if not jailed:
            log.warning(
                "Sandbox(isolation='rlimits-only'): no namespaces; candidate code can read the host's files "
                "and see its processes (seccomp still blocks network sockets). Use it only where bubblewrap "
                "cannot run."
            )
        self.protections = self._report()
        log.info("sandbox protections: %s", self.protections)
        self._pool = Pool(self.workers, self._jail_worker if jailed else self._host_worker)

    def _check_cgroup(self) -> str | None:
        version, reason = cgroups.probe()
        if version is None and self.cgroup == "required":
            raise SandboxUnavailable(
                f"no cgroup can cap an execution's total memory and processes here ({reason}); run as root on a host "
                "with cgroup v1 memory and pids or a delegated cgroup v2, or pass cgroup='best-effort' to accept "
                "per-process rlimits only."
            )
        if version is None:
            log.warning(
                "Sandbox(cgroup='best-effort'): no cgroup here (%s); memory_mb and processes bind per process "
                "(RLIMIT_AS, RLIMIT_NPROC) only: children and memfds together can exceed memory_mb.",
                reason,
            )
        return version

    def _report(self) -> dict[str, Any]:
        """What is in force for candidate code, as the host set it up."""
        jailed, capped = self.isolation == "bubblewrap", self._cgroup_version is not None
        root = os.geteuid() == 0
        return {
            "jail": "bubblewrap" if jailed else None,
            "host_uids": [jail.host_uid_range()[0], jail.host_uid_range()[-1]] if jailed else [65534 if root else os.geteuid()] * 2,
            "user_namespace": jailed,
            "proc_sys": "absent" if jailed else "host",
            "sys": "absent" if jailed else "host",
            "device_nodes": "private" if jailed and root and jail.can_make_devices() else "host",  # jail.private_devices
            "cgroup": self._cgroup_version,
            "memory_cap_mb": self.limits["memory_mb"] if capped else None,
            "process_cap": self.limits["processes"] if capped else None,
            "cgroup_caps": dict(zip(("memory_mb", "tasks"), cgroups.worker_caps(self.limits["memory_mb"], self.limits["processes"])))
            if capped
            else None,  # what the group holds: the execution, its supervisor and the zygote
            "rlimits": True,
            "seccomp": True,
            "fresh_process_per_execution": True,
        }

    def _groups(self) -> cgroups.Groups | None:
        if self._cgroup_version is None:
            return None
        return cgroups.create(self._cgroup_version, *cgroups.worker_caps(self.limits["memory_mb"], self.limits["processes"]))

    def _jail_worker(self) -> Worker:
        """A jailed zygote, as a host uid of its own when the caller is root (released with the worker)."""
        uid, lock = jail.claim_host_uid() if os.geteuid() == 0 else (None, None)
        fds = jail.module_fds()
        try:
            devices = jail.private_devices(uid) if uid is not None and jail.can_make_devices() else []
            groups = self._groups()
        except BaseException:
            _close(lock, *fds)
            raise

        def cleanup() -> None:
            if groups:
                groups.close()
            if devices:
                shutil.rmtree(jail.private_dir(uid), ignore_errors=True)
            _close(lock)

        try:
            cg_fds = groups.fds if groups else []
            command = jail.jail_command(self.tmp_size_mb, fds, cg_fds, devices)
            return Worker(command, "/", (*fds, *cg_fds), cleanup, jail.host_user(uid))
        finally:
            _close(*fds)

    def _host_worker(self) -> Worker:
        scratch = tempfile.mkdtemp(prefix="flywheel-sandbox-")
        os.chmod(scratch, 0o711)
        self._scratch.append(scratch)
        uid = 65534 if os.geteuid() == 0 else None
        groups = self._groups()
        cg_fds = groups.fds if groups else []
        return Worker(jail.host_command(scratch, uid, cg_fds), cwd=scratch, pass_fds=tuple(cg_fds), cleanup=groups.close if groups else None)

    def close(self) -> None:
        """Stop every worker (each takes the processes of its jail with it)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        for scratch in self._scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        self._scratch.clear()

    def worker_pids(self) -> list[int]:
        """Host PIDs of the workers' top processes (bwrap, or python3 in rlimits-only mode)."""
        return self._pool.pids() if self._pool is not None else []

    def run(self, code: str, stdin: str = "") -> SandboxResult:
        """Execute ``code`` as a script with ``stdin``; the result holds its capped outputs and exit status."""
        result, _ = self._execute(code, stdin, None, None)
        return result

    def run_tests(self, code: str, function_name: str, cases: Sequence[tuple[Sequence[Any], Any]]) -> TestReport:
        """Grade ``code`` by hidden tests: ``cases`` are (positional args, expected return value), JSON data.

        The child runs the code first and receives the arguments only afterwards; it never receives the
        expectations. It sends back each return value as JSON; the host compares it with the expectation
        (``same_value``). A case passes only if exactly one well-formed result for it came back and it matches.
        """
        nonce = secrets.token_hex(16)
        args = json.dumps([list(a) for a, _ in cases]).encode()
        expected = [json.loads(json.dumps(e)) for _, e in cases]
        result, raw = self._execute(code, "", {"function": function_name, "nonce": nonce}, args)
        records = _parse_results(raw, nonce, len(cases))
        report = []
        for i, want in enumerate(expected):
            got = records.get(i)
            if got is None:
                report.append(CaseResult(False, error="no result (crashed, exited, timed out, or forged twice)"))
            elif "error" in got:
                report.append(CaseResult(False, error=str(got["error"])))
            else:
                report.append(CaseResult(same_value(got["value"], want), output=got["value"]))
        return TestReport(report, result)

    def _execute(self, code: str, stdin: str, tests: dict | None, args: bytes | None) -> tuple[SandboxResult, bytes]:
        if self._pool is None:
            raise RuntimeError("the Sandbox is not started: use `with Sandbox(...) as sb:` or call start()")
        req = {
            "code": code,
            "stdin": stdin,
            "limits": self.limits,
            "wall_timeout_s": self.wall_timeout_s,
            "output_limit": self.output_limit_bytes,
            "result_limit": self.result_limit_bytes,
            "tests": tests,
        }
        try:
            reply = self._pool.execute(req, args)
        except WorkerLost as exc:
            log.warning("sandbox worker lost and replaced: %s", exc)
            return SandboxResult("", "", None, False, False, False, 0.0, error=str(exc)), b""
        result = SandboxResult(
            stdout=base64.b64decode(reply["stdout"]).decode("utf-8", "replace"),
            stderr=base64.b64decode(reply["stderr"]).decode("utf-8", "replace"),
            exit_code=reply["exit_code"],
            timed_out=reply["timed_out"],
            stdout_truncated=reply["stdout_truncated"],
            stderr_truncated=reply["stderr_truncated"],
            wall_s=reply["wall_s"],
        )
        return result, base64.b64decode(reply.get("result", ""))


#: Deepest list/dict nesting a returned value may have: deeper ones are refused, not compared (the comparison, and
#: whatever the caller does with the value, recurses once per level).
MAX_RESULT_DEPTH = 100
#: Lines of the result pipe read beyond one per case: forged or duplicated records before the real ones still count
#: as forged (missing), and the rest of any junk is never parsed.
SPARE_RESULT_LINES = 16


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _parse_results(raw: bytes, nonce: str, count: int) -> dict[int, dict[str, Any]]:
    """Result records by case index, from the child's result pipe: after the loaded marker, one JSON object per
    line carrying this execution's nonce, a case index, and a value (at most ``MAX_RESULT_DEPTH`` deep) or an error
    message. Only the first ``count + SPARE_RESULT_LINES`` lines are read (the child writes one per case), so junk
    costs the host a bounded number of parses. A case reported more than once counts as missing; anything malformed
    is ignored."""
    if not raw.startswith(_LOADED):
        return {}
    records: dict[int, dict[str, Any]] = {}
    duplicated: set[int] = set()
    lines = count + SPARE_RESULT_LINES
    for line in raw[len(_LOADED) :].split(b"\n", lines)[:lines]:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not (isinstance(rec, dict) and rec.get("nonce") == nonce and ("value" in rec) != ("error" in rec)):
            continue
        case = rec.get("case")
        if type(case) is not int or not 0 <= case < count:
            continue
        if not (isinstance(rec.get("error"), str) or _nested_within(rec.get("value"), MAX_RESULT_DEPTH)):
            continue
        if case in records:
            duplicated.add(case)
        records[case] = rec
    for case in duplicated:
        del records[case]
    return records


def _nested_within(value: Any, depth: int) -> bool:
    """Whether ``value`` nests lists and dicts at most ``depth`` levels deep (walked without recursion)."""
    level = [value]
    for _ in range(depth + 1):
        level = [x for v in level if isinstance(v, (list, dict)) for x in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return True
    return False
