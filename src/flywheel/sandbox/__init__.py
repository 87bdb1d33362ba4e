"""Code-execution sandbox: a pool of bubblewrap-jailed Python zygotes; per execution a forked child confined by
rlimits and seccomp; verdicts of hidden tests computed on the host.

    with Sandbox(workers=2, cpu_seconds=5, memory_mb=512, wall_timeout_s=10) as sb:
        sb.run("print(input())", stdin="hi")                      # -> SandboxResult
        sb.run_tests(code, "add", [((1, 2), 3), ((2, 2), 4)])     # -> TestReport

Design and threat model: see ``core.Sandbox``, ``jail.bwrap_argv``, ``seccomp`` and ``zygote``.
"""

from flywheel.sandbox.core import CaseResult, Sandbox, SandboxResult, TestReport
from flywheel.sandbox.jail import SandboxUnavailable

__all__ = ["CaseResult", "Sandbox", "SandboxResult", "SandboxUnavailable", "TestReport"]
