"""The run directory: created without overwriting, reopened for a resume (what came after the checkpoint is
dropped), and rollouts.jsonl, the fate of every admitted prompt."""

from __future__ import annotations

import json
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
    """The newest checkpoint with both trainer and controller state (None if there is none)."""
    complete = [p for p in run_dir.glob("checkpoints/step_*") if (p / "trainer_state.pt").is_file() and (p / "controller.json").is_file()]
    return max(complete, key=lambda p: int(p.name.removeprefix("step_")), default=None)


def latest_checkpoint(run_dir: Path) -> tuple[Path, dict]:
    """The newest complete checkpoint and its controller state."""
    latest = newest_checkpoint(run_dir)
    return latest, json.loads((latest / "controller.json").read_text())


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
