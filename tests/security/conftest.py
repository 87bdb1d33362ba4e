"""One shared sandbox pool for the battery (module scope), started with a secret in the caller's environment."""

from __future__ import annotations

import os
import secrets

import pytest

from flywheel.sandbox import Sandbox

SECRET_ENV = "FLYWHEEL_SANDBOX_TEST_SECRET"


@pytest.fixture(scope="module")
def secret() -> str:
    """A secret in the caller's environment, set before the pool starts (so bwrap could inherit it)."""
    value = "s3cr3t-" + secrets.token_hex(8)
    os.environ[SECRET_ENV] = value
    yield value
    os.environ.pop(SECRET_ENV, None)


@pytest.fixture(scope="module")
def sb(secret: str) -> Sandbox:
    sandbox = Sandbox(
        workers=2,
        cpu_seconds=1,
        memory_mb=256,
        wall_timeout_s=2.0,
        processes=16,
        file_size_mb=4,
        open_files=32,
        output_limit_bytes=4096,
        tmp_size_mb=16,
    )
    with sandbox:
        yield sandbox
