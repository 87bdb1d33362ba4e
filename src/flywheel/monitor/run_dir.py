"""The run directory: created without overwriting, reopened for a resume (what came after the checkpoint is
dropped), and rollouts.jsonl, the fate of every admitted prompt.

Checked before anything starts (``run_dir_problem``): the output directory can be created and written,
and a resume has a readable checkpoint. A resume skips checkpoints that are incomplete or corrupt (a
truncated trainer state, a shard shorter than its index says) and says which, resuming from the newest
sound one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from flywheel.config import Config, dump_config
from flywheel.monitor.metrics import read_metrics
from flywheel.rollout.stream import Fate, Group


def new_run_dir(config: Config) -> Path:
    """output_dir/name, or name-1, name-2... if taken: an earlier run is never overwritten."""
    root = Path(config.run.output_dir)
    candidate, suffix = root / config.run.name, 0
    while candidate.exists():
        suffix += 1
        candidate = root / f"{config.run.name}-{suffix}"
    candidate.mkdir(parents=True)
    return candidate


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint with both trainer and controller state, readable (None if there is none)."""
    return sound_checkpoints(run_dir)[0]


def sound_checkpoints(run_dir: Path) -> tuple[Path | None, list[str]]:
    """The newest complete, readable checkpoint (None if none is), and one sentence for each newer one
    that is corrupt."""
    complete = [p for p in run_dir.glob("checkpoints/step_*") if (p / "trainer_state.pt").is_file() and (p / "controller.json").is_file()]
    corrupt = []
    for checkpoint in sorted(complete, key=lambda p: int(p.name.removeprefix("step_")), reverse=True):
        problem = checkpoint_problem(checkpoint)
        if problem is None:
            return checkpoint, corrupt
        corrupt.append(f"checkpoint {checkpoint} is corrupt ({problem})")
    return None, corrupt


def checkpoint_problem(checkpoint: Path) -> str | None:
    """What makes a complete checkpoint unreadable, in a few words, or None: its trainer state and
    controller state must load, and every shard of the sharded state hold the bytes its index names."""
    import torch
    from torch.distributed.checkpoint import FileSystemReader

    try:
        torch.load(checkpoint / "trainer_state.pt", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same sentence
        return f"trainer_state.pt cannot be loaded: {type(error).__name__}: {error}"
    try:
        json.loads((checkpoint / "controller.json").read_text())
    except (ValueError, OSError) as error:
        return f"controller.json cannot be read: {type(error).__name__}: {error}"
    try:
        storage = FileSystemReader(checkpoint / "trainer").read_metadata().storage_data
    except Exception as error:  # noqa: BLE001
        return f"the index of its sharded state cannot be read: {type(error).__name__}: {error}"
    ends: dict[str, int] = {}
    for info in storage.values():
        ends[info.relative_path] = max(ends.get(info.relative_path, 0), info.offset + info.length)
    for name, end in sorted(ends.items()):
        shard = checkpoint / "trainer" / name
        size = shard.stat().st_size if shard.is_file() else None
        if size is None or size < end:
            return f"shard {name} of its sharded state holds {size or 0} bytes of the {end} its index names"
    return None


def latest_checkpoint(run_dir: Path) -> tuple[Path, dict]:
    """The newest sound checkpoint and its controller state; a line on stderr for each newer corrupt one."""
    latest, corrupt = sound_checkpoints(run_dir)
    for sentence in corrupt:
        print(f"flywheel: {sentence}; resuming from {latest} instead", file=sys.stderr, flush=True)
    return latest, json.loads((latest / "controller.json").read_text())


def run_dir_problem(config: Config) -> str | None:
    """One sentence on why the run cannot write its directory, or resume, or None: run.output_dir must be a
    directory that can be created and written (a new run), run.resume hold a readable checkpoint."""
    if config.run.resume is not None:
        latest, corrupt = sound_checkpoints(Path(config.run.resume))
        if latest is None:
            why = "; ".join(corrupt) or "no complete checkpoint"
            return f"run.resume '{config.run.resume}' holds no checkpoint to resume from: {why}; resume from an earlier run or start again"
        return None
    root = Path(config.run.output_dir)
    existing = next(p for p in (root, *root.parents) if p.exists() or p == Path(p.anchor) or str(p) == ".")
    if not existing.is_dir():
        return f"run.output_dir '{root}' cannot be created: '{existing}' is a file, not a directory; choose another run.output_dir"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"run.output_dir '{root}' cannot be created or written: '{existing}' is not writable by this user; choose another run.output_dir"
    return None


def open_run(config: Config) -> tuple[Path, Path | None, dict]:
    """(run directory, checkpoint to resume from or None, controller state); a resume drops what
    came after its checkpoint from metrics.jsonl and rollouts.jsonl."""
    if not config.run.resume:
        run_dir = new_run_dir(config)
        (run_dir / "config.yaml").write_text(dump_config(config))
        return run_dir, None, {"step": 0, "next_position": 0, "pending": [], "accepted": 0}
    run_dir = Path(config.run.resume)
    checkpoint, state = latest_checkpoint(run_dir)
    _keep_rows(run_dir / "metrics.jsonl", lambda row: row["step"] <= state["step"])
    _keep_rows(run_dir / "alerts.jsonl", lambda row: row["step"] <= state["step"])
    # a group trained at step k was trained on version k - 1
    _keep_rows(run_dir / "rollouts.jsonl", lambda row: row["fate"] != "pending" and row["trainer_version"] < state["step"])
    return run_dir, checkpoint, state


def _keep_rows(path: Path, keep) -> None:
    """Rewrites a JSON-lines file (if there is one) with only the rows ``keep`` accepts."""
    if path.is_file():
        path.write_text("".join(json.dumps(row) + "\n" for row in read_metrics(path) if keep(row)))


class RolloutDump:
    """rollouts.jsonl: one line per admitted group and what became of it (when run.dump_rollouts)."""

    def __init__(self, path: Path | None) -> None:
        self.file = path.open("a") if path else None

    def __call__(self, group: Group, fate: Fate, trainer_version: int) -> None:
        if self.file is None:
            return
        row = {
            "position": group.position,
            "fate": fate,
            "trainer_version": trainer_version,
            "rewards": [e.reward for e in group.episodes],
            "token_ids": [e.completion.token_ids for e in group.episodes],
            "weight_versions": [list(e.completion.weight_versions) for e in group.episodes],
        }
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file:
            self.file.close()
