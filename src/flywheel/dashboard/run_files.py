"""What the dashboard reads from a runs directory: the runs it holds and each run's files, read afresh
on every request (a run may still be writing) and never from outside the runs directory."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

RUN_GLOBS = ("metrics.jsonl", "*/metrics.jsonl", "*/*/metrics.jsonl")  # the root itself, runs, runs grouped one level down
ROLLOUT_FILE = re.compile(r"step_(\d+)\.parquet")


class UnknownRun(LookupError):
    """A run name that is not a run directory under the runs directory."""


def find_runs(root: Path) -> list[str]:
    """Names (paths relative to ``root``, ``.`` for ``root`` itself) of the directories holding a metrics.jsonl,
    up to two levels down, leaving out any that resolves outside ``root`` (a symlink)."""
    base = root.resolve()
    found = {p.parent for pattern in RUN_GLOBS for p in root.glob(pattern) if p.is_file()}
    return sorted(d.relative_to(root).as_posix() for d in found if d.resolve().is_relative_to(base))


def run_dir(root: Path, name: str) -> Path:
    """The directory of run ``name``; only names ``find_runs`` lists are accepted."""
    if name not in find_runs(root):
        raise UnknownRun(f"no run named {name!r} under {root} (GET /api/runs lists them)")
    return root / name


def jsonable(value):
    """``value`` with every non-finite float written as a string ("nan", "inf", "-inf"), as metrics.jsonl stores them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def read_jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file ([] when it does not exist); a last line still being written is left out."""
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise ValueError(f"{path}: line {i + 1} is not JSON") from None
    return rows


def metric_names(rows: list[dict]) -> list[str]:
    """Every metric name in ``rows`` (all keys but ``step``), sorted."""
    return sorted({key for row in rows for key in row} - {"step"})


def rollout_steps(run: Path) -> list[int]:
    """Steps with a rollout dump (rollouts/step_NNNNNN.parquet), ascending."""
    names = (p.name for p in (run / "rollouts").glob("step_*.parquet"))
    return sorted(int(m.group(1)) for m in map(ROLLOUT_FILE.fullmatch, names) if m)


def read_rollouts(run: Path, step: int) -> list[dict]:
    """The episodes dumped at ``step``, one dict per Parquet row ([] when that step has no dump)."""
    import pyarrow.parquet as pq

    path = run / "rollouts" / f"step_{step:06d}.parquet"
    return pq.read_table(path).to_pylist() if path.is_file() else []


def run_summary(root: Path, name: str) -> dict:
    """What the run list shows: last step, dumped steps, timeline spans and alerts present."""
    run = root / name
    rows = read_jsonl(run / "metrics.jsonl")
    return {
        "name": name,
        "last_step": rows[-1].get("step") if rows else None,
        "rollout_steps": rollout_steps(run),
        "timeline": (run / "timeline.jsonl").is_file(),
        "alerts": len(read_jsonl(run / "alerts.jsonl")),
    }
