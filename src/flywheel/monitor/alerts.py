"""Alerts on a run's health, read from each step's metrics row: entropy collapse, a mismatch-KL spike,
non-finite loss or gradients, reward stagnation, a rising invalid-episode rate and engines lost. The
hacking alerts of the reward pipeline and the invalid-episode threshold of the controller join them.

An alert goes to the terminal (the progress log), to ``alerts.jsonl`` in the run directory
(``{"step", "kind", "message", "time_s"}``), to the step's ``alerts/fired`` metric, and stops the run
when its kind is in ``alerts.stop_on``. A condition alerts when it starts, not again on every step it
lasts: it must clear before it alerts again.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from flywheel.config import AlertsConfig
from flywheel.monitor.metrics import read_metrics
from flywheel.rewards.guards.alert import running_baseline


@dataclass(frozen=True)
class Alert:
    step: int
    kind: str
    message: str


def _number(row: dict, name: str) -> float | None:
    """A metric as a float (non-finite values are logged as strings); None when absent."""
    value = row.get(name)
    return None if value is None else float(value)


@dataclass
class HealthRules:
    """The step-by-step conditions (pure: state in, alerts out; no I/O)."""

    config: AlertsConfig
    first_entropy: float | None = None
    mismatch_baseline: float | None = None
    invalid_baseline: float | None = None
    best_reward: float = -math.inf
    best_step: int = 0
    engines_seen: int | None = None
    active: set[str] = field(default_factory=set)

    def check(self, step: int, row: dict) -> list[Alert]:
        """The alerts that start at this step."""
        conditions = {
            "entropy_collapse": self._entropy(row),
            "mismatch_spike": self._mismatch(row),
            "nonfinite": self._nonfinite(row),
            "reward_stagnation": self._stagnation(step, row),
            "invalid_rise": self._invalid_rise(row),
            "engines_lost": self._engines(row),
        }
        started = [Alert(step, kind, message) for kind, message in conditions.items() if message and kind not in self.active]
        self.active = {kind for kind, message in conditions.items() if message}
        return started

    def _entropy(self, row: dict) -> str | None:
        entropy = _number(row, "train/entropy")
        if entropy is None or not math.isfinite(entropy):
            return None
        if self.first_entropy is None:
            self.first_entropy = entropy
        floor = self.config.entropy_drop * self.first_entropy
        if entropy < floor:
            return f"entropy collapse: train/entropy {entropy:.4g} nats/token is below {self.config.entropy_drop:g} x its first value {self.first_entropy:.4g}"
        return None

    def _mismatch(self, row: dict) -> str | None:
        kl = _number(row, "train/mismatch_kl")
        if kl is None or not math.isfinite(kl):
            return None
        baseline, c = self.mismatch_baseline, self.config
        self.mismatch_baseline = running_baseline(baseline, kl, c.decay)
        if kl > c.mismatch_kl_max:
            return (
                f"mismatch KL spike: train/mismatch_kl {kl:.3g} is above alerts.mismatch_kl_max {c.mismatch_kl_max:g} (trainer and engine disagree)"
            )
        if baseline is not None and kl > c.mismatch_spike_factor * max(baseline, c.mismatch_kl_floor):
            return (
                f"mismatch KL spike: train/mismatch_kl {kl:.3g} is {kl / max(baseline, c.mismatch_kl_floor):.0f}x its running baseline {baseline:.3g}"
            )
        return None

    def _nonfinite(self, row: dict) -> str | None:
        skipped = _number(row, "train/nonfinite_skipped") or 0.0
        bad = [name for name in ("loss/policy", "train/grad_norm") if name in row and not math.isfinite(float(row[name]))]
        if skipped > 0 or bad:
            named = f" ({', '.join(bad)} not finite)" if bad else ""
            return f"non-finite loss or gradient: {skipped:.0%} of the optimiser steps skipped{named}"
        return None

    def _stagnation(self, step: int, row: dict) -> str | None:
        reward = _number(row, "reward/mean")
        if reward is None or not math.isfinite(reward):
            return None
        if reward > self.best_reward + self.config.stagnation_delta or self.best_step == 0:
            self.best_reward, self.best_step = max(reward, self.best_reward), step
        if step - self.best_step >= self.config.stagnation_steps:
            return f"reward stagnation: reward/mean has not passed its best {self.best_reward:.4g} (step {self.best_step}) by {self.config.stagnation_delta:g} in {step - self.best_step} steps"
        return None

    def _invalid_rise(self, row: dict) -> str | None:
        rate = _number(row, "rollout/invalid_frac")
        if rate is None:
            return None
        baseline, c = self.invalid_baseline, self.config
        self.invalid_baseline = running_baseline(baseline, rate, c.decay)
        if baseline is not None and rate > baseline + c.invalid_rise:
            return f"rising environment error rate: {rate:.0%} of the step's episodes were invalid, {rate - baseline:.0%} above the running baseline {baseline:.0%} (first tracebacks in errors/)"
        return None

    def _engines(self, row: dict) -> str | None:
        live = _number(row, "engines/live")
        if live is None:
            return None
        seen, self.engines_seen = self.engines_seen, int(max(live, self.engines_seen or 0))
        if seen is not None and live < seen:
            return f"engines lost: {int(live)} of {seen} engine replicas are live (engines/restarts {int(_number(row, 'engines/restarts') or 0)})"
        return None


class AlertLog:
    """Where alerts go: the terminal, alerts.jsonl, the row's ``alerts/fired``; a stop when asked."""

    def __init__(self, config: AlertsConfig, path: Path, say, started: float) -> None:
        self.rules, self.stop_on, self.say, self.started = HealthRules(config), set(config.stop_on), say, started
        self.file = path.open("a", buffering=1)

    def step(self, step: int, row: dict, outside: list[Alert] = ()) -> list[Alert]:
        """Checks the row, records its alerts and those raised elsewhere (``outside``), sets
        row["alerts/fired"]; returns the alerts whose kind asks to stop the run."""
        alerts = [*outside, *self.rules.check(step, row)]
        for alert in alerts:
            self.say(f"step {step:4d}  {alert.message}")
            record = {"step": step, "kind": alert.kind, "message": alert.message, "time_s": round(time.perf_counter() - self.started, 3)}
            self.file.write(json.dumps(record) + "\n")
        row["alerts/fired"] = len(alerts)
        return [a for a in alerts if a.kind in self.stop_on]

    def close(self) -> None:
        self.file.close()


def read_alerts(run_dir: Path) -> list[dict]:
    path = run_dir / "alerts.jsonl"
    return read_metrics(path) if path.is_file() else []
