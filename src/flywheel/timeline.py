"""timeline.jsonl: what every actor did when, step by step.

One JSON object per span, written as it ends:
``{"actor": str, "stage": str, "step": int, "start_s": float, "end_s": float}``, in seconds since the run
started on the driver's wall clock (``time.time()``). Actors measured elsewhere (the trainer ranks) return
``time.time()`` stamps, converted here by subtracting the driver's start: on one machine the clocks are
the same, across machines they are as close as the nodes' clock sync.

Actors and their stages: ``controller`` (wait_for_batch, train, sync, eval, checkpoint), ``trainer``
(forward, backward, optimizer from rank 0's own clock; publish timed by the driver), ``engine-<i>`` (generate, load_weights, pause), ``reward``
(scoring) and ``env`` (steps). Spans from the rollout side carry the step the controller was on when
they ended. A resumed run appends, its clock continuing from the last span written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Span:
    actor: str
    stage: str
    step: int
    start_s: float
    end_s: float


class Timeline:
    """Records spans to ``path`` (None: records nothing). ``step`` is the controller's step under way,
    the step of spans recorded without one."""

    def __init__(self, path: Path | None) -> None:
        self.step = 0
        self.started = time.time() - _last_end(path)
        self._file = path.open("a", buffering=1) if path else None

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def add(self, actor: str, stage: str, start: float, end: float, step: int | None = None) -> None:
        """A span between two ``time.time()`` stamps."""
        if self._file is None:
            return
        span = Span(actor, stage, self.step if step is None else step, round(start - self.started, 6), round(end - self.started, 6))
        self._file.write(json.dumps(asdict(span)) + "\n")

    @contextmanager
    def span(self, actor: str, stage: str, step: int | None = None) -> Iterator[None]:
        """Records the time the block takes (also when it raises)."""
        start = time.time()
        try:
            yield
        finally:
            self.add(actor, stage, start, time.time(), step)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_timeline(path: Path) -> list[Span]:
    return [Span(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _last_end(path: Path | None) -> float:
    """The end of the last span in an existing timeline (0 for none): a resumed run's clock goes on from there."""
    if path is None or not path.is_file():
        return 0.0
    return max((span.end_s for span in read_timeline(path)), default=0.0)
