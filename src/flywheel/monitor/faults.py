"""Episode faults in the run directory: the first traceback of each kind, written once.

A kind is the failure (``env_error``, ``env_timeout``, ``nonfinite_reward``) and, for an exception,
its type: ``errors/env_error-ZeroDivisionError.txt``. Later faults of a kind are only counted (in
the step's metrics), so a run with a broken environment does not fill the disk.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from flywheel.types import Episode, RemoteCause


class FaultLog:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seen: set[str] = set()

    def record(self, episode: Episode, step: int) -> str | None:
        """Writes the episode's fault if its kind is new; returns the new kind (None if seen or valid)."""
        if episode.valid:
            return None
        failure = getattr(episode, "failure", None)
        cause = failure.__cause__ if failure is not None else None
        remote = isinstance(cause, RemoteCause)  # raised in a rollout worker
        kind = episode.fault
        if cause is not None:
            kind += f"-{cause.type_name if remote else type(cause).__name__}"
        if kind in self.seen:
            return None
        self.seen.add(kind)
        self.directory.mkdir(parents=True, exist_ok=True)
        if cause is None:
            detail = f"reward {episode.reward!r}\n"
        else:
            detail = cause.text if remote else "".join(traceback.format_exception(cause))
        (self.directory / f"{kind}.txt").write_text(f"first seen at step {step}: {failure or kind}\n\n{detail}")
        return kind
