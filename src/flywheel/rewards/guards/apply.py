"""Run guards over a batch: flags, reasons, penalised rewards and `hacking/<guard>_rate` metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from flywheel.rewards.faults import RewardFault
from flywheel.rewards.guards.base import Guard
from flywheel.rewards.normalize import normalize

Mode = Literal["flag", "penalize", "zero"]
MODES = ("flag", "penalize", "zero")


@dataclass(frozen=True)
class GuardReport:
    """Per completion: whether any guard flagged it and why ("<guard>: <reason>"); the rewards after the mode;
    per guard: `hacking/<guard>_rate`, plus `hacking/any_rate`; per completion, the fault of a guard that
    raised on it (None: none did), which makes its episode invalid."""

    flagged: list[bool]
    reasons: list[list[str]]
    rewards: list[float]
    metrics: dict[str, float]
    faults: list[RewardFault | None] = field(default_factory=list)


def apply_guards(
    completions: Sequence[str],
    guards: Sequence[Guard],
    mode: Mode,
    *,
    rewards: Sequence[float],
    tasks: Sequence[dict | None] | None = None,
    penalty: float = 1.0,
) -> GuardReport:
    """Check every completion, ``normalize``d first (NFKC, no zero-width or tag characters), with every guard;
    "flag" keeps rewards, "penalize" subtracts `penalty` once from a flagged completion's reward, "zero" sets it
    to 0.0."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tasks = list(tasks) if tasks is not None else [None] * len(completions)
    if not len(completions) == len(rewards) == len(tasks):
        raise ValueError("completions, rewards and tasks must have the same length")
    names = [g.name for g in guards]
    if len(set(names)) != len(names):
        raise ValueError(f"guard names must be unique, got {names}")
    counts = dict.fromkeys(names, 0)
    reasons: list[list[str]] = []
    faults: list[RewardFault | None] = []
    for completion, task in zip(completions, tasks, strict=True):
        completion, hits, fault = normalize(completion), [], None
        for guard in guards:
            try:
                verdict = guard.check(completion, task)
            except Exception as error:  # noqa: BLE001 - a guard's fault fails that episode only
                fault = fault or _raised(guard.name, error)
                continue
            if verdict.flagged:
                counts[guard.name] += 1
                hits.append(f"{guard.name}: {verdict.reason}")
        reasons.append(hits)
        faults.append(fault)
    flagged = [bool(r) for r in reasons]
    new_rewards = [_apply(float(r), f, mode, penalty) for r, f in zip(rewards, flagged, strict=True)]
    n = max(len(completions), 1)
    metrics = {f"hacking/{name}_rate": c / n for name, c in counts.items()}
    metrics["hacking/any_rate"] = sum(flagged) / n
    return GuardReport(flagged, reasons, new_rewards, metrics, faults)


def _raised(name: str, error: Exception) -> RewardFault:
    fault = RewardFault("reward_error", f"guard {name!r} raised {type(error).__name__}: {error}")
    fault.__cause__ = error
    return fault


def _apply(reward: float, flagged: bool, mode: Mode, penalty: float) -> float:
    if not flagged or mode == "flag":
        return reward
    return reward - penalty if mode == "penalize" else 0.0
