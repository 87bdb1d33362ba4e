"""Reads an offline W&B run's .wandb file (wandb 0.31 ships no Python reader of its own).

The file is a LevelDB-style log: a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of
chunks, each a 7-byte header (CRC32, little-endian length, type: 1 full, 2 first, 3 middle, 4 last)
and its bytes; a record (a ``wandb_internal_pb2.Record``) is one full chunk or first..last.
"""

import json
import struct
from pathlib import Path

BLOCK, HEADER = 32768, 7


def wandb_records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B log"
    records, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        pos += HEADER
        if kind == 0:  # zero padding up to the block's end
            pos += left - HEADER
            continue
        pending += data[pos : pos + length]
        pos += length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def wandb_history(path: Path) -> list[dict]:
    """The run's history rows (``run.log`` calls): metric name -> value, with ``_step``."""
    rows = []
    for record in wandb_records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
    return rows
