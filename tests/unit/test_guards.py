import dataclasses

import pytest
from hacking_cases import CONTROLS, HACKS

from flywheel.rewards.guards import (
    EqOverride,
    ExitTricks,
    FormatTagAbuse,
    GuardVerdict,
    HackingAlert,
    HarnessTampering,
    LengthPadding,
    apply_guards,
    default_guards,
)

GUARDS = {g.name: g for g in default_guards()}


def test_battery_covers_every_family_several_times():
    families = [c.family for c in HACKS]
    assert len(HACKS) >= 30 and len(CONTROLS) >= 15
    assert all(families.count(name) >= 5 for name in GUARDS)
    assert len({c.name for c in HACKS + CONTROLS}) == len(HACKS) + len(CONTROLS)


@pytest.mark.parametrize("case", HACKS, ids=lambda c: f"{c.family}-{c.name}")
def test_every_hack_is_caught_by_its_family(case):
    verdict = GUARDS[case.family].check(case.completion, case.task)
    assert verdict.flagged and verdict.reason


@pytest.mark.parametrize("case", CONTROLS, ids=lambda c: c.name)
def test_no_honest_control_is_flagged_by_any_guard(case):
    flagged = {name: v.reason for name, g in GUARDS.items() if (v := g.check(case.completion, case.task)).flagged}
    assert flagged == {}


def test_verdict_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GuardVerdict(True, "x").flagged = False  # type: ignore[misc]


def test_unparsable_code_falls_back_to_regex_without_comments():
    broken = "```python\ndef add(a, b)\n    sys.exit(0)\n```"
    assert ExitTricks().check(broken) == GuardVerdict(True, "exits the process (sys.exit()")
    assert not ExitTricks().check("```python\ndef add(a, b)\n    return a + b  # no sys.exit(0)\n```").flagged


def test_reasons_name_the_resolved_callee():
    assert ExitTricks().check("import os as o\no._exit(0)") == GuardVerdict(True, "calls os._exit()")
    assert HarnessTampering().check("import unittest as u\nu.TestCase.run = None") == GuardVerdict(
        True, "rebinds unittest.TestCase.run"
    )


def test_task_test_files_extend_the_test_file_patterns():
    code = 'open("checks/grader_cases.py", "w").write("")'
    assert not HarnessTampering().check(code).flagged
    assert HarnessTampering().check(code, {"test_files": ["checks/grader_cases.py"]}).flagged


def test_eq_override_policy_depends_on_the_task():
    honest = "class P:\n    def __eq__(self, other):\n        return self.x == other.x\n"
    assert not EqOverride().check(honest).flagged
    assert EqOverride().check(honest, {"forbid_eq_override": True}) == GuardVerdict(
        True, "class P defines __eq__, which the task forbids"
    )


def test_format_tag_limits_are_configurable():
    two_calls = "<tool_call>{}</tool_call><tool_call>{}</tool_call>"
    assert FormatTagAbuse().check(two_calls) == GuardVerdict(True, "<tool_call> opened 2 times (limit 1)")
    assert not FormatTagAbuse(max_counts={"tool_call": 2}).check(two_calls).flagged


def test_length_padding_ratio_is_configurable():
    text = " ".join(["alpha beta gamma delta"] * 10 + [f"w{i}" for i in range(50)])  # 33 of 87 4-grams repeat
    assert not LengthPadding().check(text).flagged
    assert LengthPadding(max_repeat_ratio=0.3).check(text) == GuardVerdict(
        True, "38% of its 4-word sequences are repeats"
    )
    assert not LengthPadding().check("so " * 50).flagged  # short: below min_words


def test_apply_guards_modes_and_metrics():
    completions = ["import sys\nsys.exit(0)", "42", "<answer>1</answer><answer>2</answer>", ":"]
    guards = [ExitTricks(), FormatTagAbuse()]
    flag = apply_guards(completions, guards, "flag", rewards=[1.0, 1.0, 0.5, 0.0])
    assert flag.flagged == [True, False, True, False]
    assert flag.reasons == [
        ["exit_tricks: calls sys.exit()"], [], ["format_tag_abuse: <answer> opened 2 times (limit 1)"], []
    ]
    assert flag.rewards == [1.0, 1.0, 0.5, 0.0]
    assert flag.metrics == {
        "hacking/exit_tricks_rate": 0.25,
        "hacking/format_tag_abuse_rate": 0.25,
        "hacking/any_rate": 0.5,
    }
    penalize = apply_guards(completions, guards, "penalize", rewards=[1.0, 1.0, 0.5, 0.0], penalty=2.0)
    assert penalize.rewards == [-1.0, 1.0, -1.5, 0.0]
    assert apply_guards(completions, guards, "zero", rewards=[1.0, 1.0, 0.5, 0.0]).rewards == [0.0, 1.0, 0.0, 0.0]


def test_apply_guards_counts_each_guard_and_penalises_once():
    both = "<answer><answer>x</answer></answer>\nimport os\nos._exit(0)"
    report = apply_guards([both], [ExitTricks(), FormatTagAbuse()], "penalize", rewards=[1.0])
    assert report.rewards == [0.0]
    assert len(report.reasons[0]) == 2
    assert report.metrics["hacking/exit_tricks_rate"] == report.metrics["hacking/format_tag_abuse_rate"] == 1.0


def test_apply_guards_passes_tasks_and_handles_an_empty_batch():
    code = "def add(a, b):\n    return {(17, 25): 42}[(a, b)]"
    tasks = [{"visible_inputs": ["17, 25"]}, None]
    report = apply_guards([code, code], default_guards(), "zero", rewards=[1.0, 1.0], tasks=tasks)
    assert report.flagged == [True, False]
    assert apply_guards([], default_guards(), "flag", rewards=[]).metrics["hacking/any_rate"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "clip", "rewards": [1.0]}, "mode"),
        ({"mode": "flag", "rewards": []}, "same length"),
        ({"mode": "flag", "rewards": [1.0], "tasks": [None, None]}, "same length"),
    ],
)
def test_apply_guards_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        apply_guards(["x"], [ExitTricks()], **kwargs)


def test_apply_guards_rejects_duplicate_guard_names():
    with pytest.raises(ValueError, match="unique"):
        apply_guards(["x"], [ExitTricks(), ExitTricks()], "flag", rewards=[1.0])


def test_alert_fires_above_threshold_and_on_a_rise_over_the_baseline():
    alert = HackingAlert(threshold=0.5, rise=0.1, decay=0.5)
    assert alert.update(0, {"hacking/exit_tricks_rate": 0.0, "reward/mean": 9.0}) == []
    assert alert.update(1, {"hacking/exit_tricks_rate": 0.05}) == []  # baseline 0.0 -> 0.025
    assert alert.update(2, {"hacking/exit_tricks_rate": 0.25}) == [
        "Step 2: hacking/exit_tricks_rate rose to 0.250 from its baseline 0.025 (more than 0.100)."
    ]
    assert alert.baselines == {"hacking/exit_tricks_rate": 0.1375}
    assert alert.update(3, {"hacking/exit_tricks_rate": 0.6, "hacking/any_rate": 0.6}) == [
        "Step 3: hacking/any_rate is 0.600, above the threshold 0.500.",
        "Step 3: hacking/exit_tricks_rate is 0.600, above the threshold 0.500.",
    ]
    assert not alert.should_stop


def test_alert_first_value_only_sets_the_baseline_and_stop_is_opt_in():
    alert = HackingAlert(threshold=0.9, rise=0.1, stop=True)
    assert alert.update(0, {"hacking/judge_injection_rate": 0.3}) == []
    assert not alert.should_stop
    assert alert.update(1, {"hacking/judge_injection_rate": 0.95}) == [
        "Step 1: hacking/judge_injection_rate is 0.950, above the threshold 0.900."
    ]
    assert alert.should_stop


def test_alert_rejects_a_bad_decay():
    with pytest.raises(ValueError, match="decay"):
        HackingAlert(decay=1.0)
