"""``flywheel inspect RUN_DIR``: a run on one screen - the config's departures from the defaults, the last
metrics, the alerts and the slowest stages of the actor timeline."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from flywheel.config import Config
from flywheel.monitor.alerts import read_alerts
from flywheel.monitor.metrics import read_metrics
from flywheel.timeline import Span, read_timeline

HEADLINE = (
    "reward/mean",
    "eval/accuracy",
    "eval/greedy_accuracy",
    "loss/policy",
    "train/entropy",
    "train/mismatch_kl",
    "train/grad_norm",
    "rollout/staleness_mean",
    "rollout/invalid_frac",
    "hacking/any_rate",
    "timing/step_s",
    "timing/elapsed_s",
)


def config_diff(tree: dict[str, Any], defaults: dict[str, Any], prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (value, default) for every leaf of ``tree`` that differs from ``defaults``."""
    diff: dict[str, tuple[Any, Any]] = {}
    for key, value in tree.items():
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if isinstance(value, dict) and isinstance(default, dict):
            diff |= config_diff(value, default, f"{prefix}{key}.")
        elif value != default:
            diff[f"{prefix}{key}"] = (value, default)
    return diff


def slowest_stages(spans: list[Span], top: int = 8) -> list[tuple[str, str, float, int]]:
    """(actor, stage, total seconds, spans) of the timeline, most time first."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(list)
    for span in spans:
        totals[(span.actor, span.stage)].append(span.end_s - span.start_s)
    ranked = sorted(((actor, stage, sum(d), len(d)) for (actor, stage), d in totals.items()), key=lambda r: -r[2])
    return ranked[:top]


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def summary(run_dir: Path) -> str:
    """The text ``flywheel inspect`` prints."""
    if not (run_dir / "metrics.jsonl").is_file():
        raise FileNotFoundError(f"'{run_dir}' is not a run directory (no metrics.jsonl); pass a directory under run.output_dir")
    lines = [f"run {run_dir}"]
    if (run_dir / "config.yaml").is_file():
        tree = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        diff = config_diff(tree, Config().model_dump(mode="json"))
        lines += ["", f"config: {len(diff)} settings differ from the defaults"]
        lines += [f"  {key} = {_format(value)}  (default {_format(default)})" for key, (value, default) in diff.items()]
    rows = read_metrics(run_dir / "metrics.jsonl")
    trained = [r for r in rows if r["step"] > 0 and "timing/step_s" in r]
    lines += ["", f"metrics: {len(trained)} steps trained" + (f", last step {trained[-1]['step']}" if trained else "")]
    for name in HEADLINE:
        last = next(((r["step"], r[name]) for r in reversed(rows) if name in r), None)
        if last is not None:
            lines.append(f"  {name:<24} {_format(last[1]):>10}  (step {last[0]})")
    alerts = read_alerts(run_dir)
    lines += ["", f"alerts: {len(alerts)}"] + [f"  step {a['step']:>4}  [{a['kind']}] {a['message']}" for a in alerts[-20:]]
    timeline = run_dir / "timeline.jsonl"
    if timeline.is_file():
        spans = read_timeline(timeline)
        lines += ["", "slowest stages (actor / stage: total seconds over spans)"]
        lines += [f"  {actor:<12} {stage:<16} {total:9.2f} s  over {count} spans" for actor, stage, total, count in slowest_stages(spans)]
    else:
        lines += ["", "timeline: none (timeline.jsonl not written)"]
    return "\n".join(lines)
