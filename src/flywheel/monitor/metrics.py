"""metrics.jsonl: one JSON object per step, flushed as it is written."""

from __future__ import annotations

import json
import math
from pathlib import Path


class MetricsLog:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a", buffering=1)

    def write(self, row: dict[str, float | int]) -> None:
        clean = {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in row.items()}
        self._file.write(json.dumps(clean) + "\n")

    def close(self) -> None:
        self._file.close()


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
