"""Length-prefixed frames on raw pipe fds, shared by the host and the jailed zygote (standard library only).

A frame is a 4-byte big-endian length followed by that many bytes. Frames are read exactly (no read-ahead
buffer), so a frame that follows on the same pipe stays in the kernel until it is asked for.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

MAX_FRAME = 1 << 28
_HEADER = struct.Struct(">I")


def read_exact(fd: int, size: int, deadline: float | None = None) -> bytearray | None:
    """Read exactly ``size`` bytes into a fresh bytearray; None on end of file.

    With a ``deadline`` (time.monotonic() value), raise TimeoutError once it passes with bytes still missing.
    """
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError(f"no frame data within the deadline ({got}/{size} bytes)")
        n = os.readv(fd, [view[got:]])
        if n == 0:
            return None
        got += n
    return buf


def recv(fd: int, deadline: float | None = None) -> bytearray | None:
    """Read one frame's payload; None when the pipe is closed between frames."""
    header = read_exact(fd, _HEADER.size, deadline)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    payload = read_exact(fd, size, deadline)
    if payload is None:
        raise EOFError("pipe closed inside a frame")
    return payload


def send(fd: int, payload: bytes) -> None:
    """Write one frame (blocking)."""
    send_raw(fd, _HEADER.pack(len(payload)) + payload)


def send_raw(fd: int, payload: bytes) -> None:
    """Write bytes as they are, no frame (blocking)."""
    data = memoryview(payload)
    while data:
        data = data[os.write(fd, data) :]


def send_json(fd: int, obj: Any) -> None:
    send(fd, json.dumps(obj, separators=(",", ":")).encode())
