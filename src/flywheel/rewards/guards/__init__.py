"""Reward-hacking guards: detectors of graders being gamed, batch application, and a training-time alert."""

from flywheel.rewards.guards.alert import HackingAlert
from flywheel.rewards.guards.apply import GuardReport, apply_guards
from flywheel.rewards.guards.base import Guard, GuardVerdict
from flywheel.rewards.guards.dynamic import DynamicCode
from flywheel.rewards.guards.equality import EqOverride
from flywheel.rewards.guards.exits import ExitTricks
from flywheel.rewards.guards.harness import HarnessTampering
from flywheel.rewards.guards.introspection import ForbiddenIntrospection
from flywheel.rewards.guards.judge import JudgeInjection
from flywheel.rewards.guards.padding import LengthPadding
from flywheel.rewards.guards.special_casing import VisibleTestSpecialCasing
from flywheel.rewards.guards.tags import FormatTagAbuse


def default_guards() -> list[Guard]:
    """One instance of every guard, with default settings."""
    return [
        ExitTricks(), EqOverride(), HarnessTampering(), VisibleTestSpecialCasing(), ForbiddenIntrospection(),
        DynamicCode(), JudgeInjection(), FormatTagAbuse(), LengthPadding(),
    ]  # fmt: skip


__all__ = [
    "DynamicCode", "EqOverride", "ExitTricks", "ForbiddenIntrospection", "FormatTagAbuse", "Guard", "GuardReport",
    "GuardVerdict", "HackingAlert", "HarnessTampering", "JudgeInjection", "LengthPadding", "VisibleTestSpecialCasing",
    "apply_guards", "default_guards",
]  # fmt: skip
