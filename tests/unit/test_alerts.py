"""The health alerts: each condition fires when it starts, once, and again only after it cleared."""

import json

from flywheel.config import AlertsConfig
from flywheel.monitor.alerts import Alert, AlertLog, HealthRules, read_alerts


def kinds(rules: HealthRules, rows: list[dict]) -> list[tuple[int, str]]:
    return [(a.step, a.kind) for step, row in enumerate(rows, 1) for a in rules.check(step, row)]


def test_entropy_collapse_against_its_first_value():
    rows = [{"train/entropy": e} for e in (2.0, 1.0, 0.21, 0.19, 0.1, 0.5, 0.15)]
    # floor 0.1 x 2.0 = 0.2: fires at 0.19 (step 4), lasts through 0.1, clears at 0.5, fires again at 0.15
    assert kinds(HealthRules(AlertsConfig()), rows) == [(4, "entropy_collapse"), (7, "entropy_collapse")]


def test_mismatch_spike_absolute_and_relative():
    config = AlertsConfig(mismatch_kl_max=0.05, mismatch_spike_factor=10, mismatch_kl_floor=1e-4, decay=0.5)
    rows = [{"train/mismatch_kl": v} for v in (1e-6, 1e-6, 5e-4, 3e-3, 1e-6, 0.06)]
    # step 3: 5e-4 < 10 x max(baseline 1e-6, floor 1e-4) = 1e-3, no spike; baseline then 0.5 * 1e-6 + 0.5 * 5e-4 = 2.505e-4;
    # step 4: 3e-3 > 10 x 2.505e-4: relative spike; step 5 clears; step 6: 0.06 > 0.05, absolute
    assert kinds(HealthRules(config), rows) == [(4, "mismatch_spike"), (6, "mismatch_spike")]


def test_nonfinite_from_skipped_steps_or_logged_strings():
    rows = [{"train/nonfinite_skipped": 0.0, "loss/policy": 0.1}, {"train/nonfinite_skipped": 0.5}, {"loss/policy": "nan"}, {"loss/policy": 0.2}]
    rules = HealthRules(AlertsConfig())
    alerts = [a for step, row in enumerate(rows, 1) for a in rules.check(step, row)]
    assert [(a.step, a.kind) for a in alerts] == [(2, "nonfinite")]  # step 3 continues the condition
    assert "50% of the optimiser steps skipped" in alerts[0].message


def test_reward_stagnation_after_n_steps_without_progress():
    config = AlertsConfig(stagnation_steps=3, stagnation_delta=0.05)
    rows = [{"reward/mean": r} for r in (0.1, 0.3, 0.32, 0.34, 0.33, 0.5, 0.5)]
    # best 0.3 at step 2; 0.32, 0.34 are within 0.05; step 5 is 3 steps later: stagnation; 0.5 clears it
    assert kinds(HealthRules(config), rows) == [(5, "reward_stagnation")]


def test_rising_invalid_rate_and_engines_lost():
    config = AlertsConfig(invalid_rise=0.1, decay=0.5)
    rows = [
        {"rollout/invalid_frac": 0.0, "engines/live": 2},
        {"rollout/invalid_frac": 0.05, "engines/live": 2},
        {"rollout/invalid_frac": 0.3, "engines/live": 1, "engines/restarts": 1},
        {"rollout/invalid_frac": 0.0, "engines/live": 2},
    ]
    # baseline after step 2: 0.5 * 0 + 0.5 * 0.05 = 0.025; 0.3 > 0.125: rise. Live 1 < 2: lost
    assert kinds(HealthRules(config), rows) == [(3, "invalid_rise"), (3, "engines_lost")]


def test_alert_log_writes_every_alert_and_names_the_stops(tmp_path):
    said = []
    log = AlertLog(AlertsConfig(stop_on=["nonfinite"]), tmp_path / "alerts.jsonl", said.append, started=0.0)
    row = {"train/nonfinite_skipped": 1.0}
    stops = log.step(7, row, [Alert(7, "hacking", "hacking/any_rate rose")])
    log.close()
    assert [a.kind for a in stops] == ["nonfinite"]
    assert row["alerts/fired"] == 2
    assert said == ["step    7  hacking/any_rate rose", "step    7  non-finite loss or gradient: 100% of the optimiser steps skipped"]
    written = read_alerts(tmp_path)
    assert [(r["step"], r["kind"]) for r in written] == [(7, "hacking"), (7, "nonfinite")]
    assert all(isinstance(r["time_s"], float) for r in written)
    assert json.loads((tmp_path / "alerts.jsonl").read_text().splitlines()[0])["message"] == "hacking/any_rate rose"
