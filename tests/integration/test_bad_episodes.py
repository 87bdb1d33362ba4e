"""One bad episode never ends a run: environments that raise and rewards that are NaN are left out of
the advantages, counted, and written once per kind to errors/; an alert can stop the run."""

import json
import math
from pathlib import Path

import pytest
from helpers import SYNC, undocumented_metrics

from flywheel.config import load_config
from flywheel.controller import RunStopped, train
from flywheel.envs.arithmetic import ArithmeticEnv
from flywheel.envs.base import final
from flywheel.envs.registry import register_env

REPO = Path(__file__).resolve().parents[2]


@register_env("flaky_arithmetic")
class FlakyArithmetic(ArithmeticEnv):
    """The quickstart task, except that answers starting with 1 make step raise and answers starting
    with 2 get a NaN reward."""

    def step(self, model_text: str):
        if model_text.startswith("1"):
            raise ValueError("a grader bug")
        if model_text.startswith("2"):
            return final(math.nan)
        return super().step(model_text)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def config(tmp_path: Path, *extra: str):
    return load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "task.name=flaky_arithmetic",
            "run.steps=3",
            "rollout.prompts_per_step=16",
            "eval.every=100",
            "eval.greedy=false",
            "run.progress=false",
            "run.dump_rollouts=true",
            "rollout.invalid_alert_rate=1.0",
            f"run.output_dir={tmp_path}",
            *extra,
        ],
    )


def test_raising_and_nan_episodes_are_left_out_and_the_run_goes_on(fresh_workers, tmp_path):
    c = config(tmp_path)
    run_dir = train(c, fresh_workers(c))
    steps = rows(run_dir / "metrics.jsonl")[1:]
    assert [r["step"] for r in steps] == [1, 2, 3] and not undocumented_metrics(steps)
    assert sum(r["env/errors"] for r in steps) > 0 and sum(r["reward/nonfinite"] for r in steps) > 0
    for r in steps:
        assert math.isfinite(r["loss/policy"]) and r["train/nonfinite_skipped"] == 0.0  # nothing non-finite was trained on
        assert math.isfinite(r["reward/mean"]) and 0 < r["rollout/invalid_frac"] < 1
    assert sorted(p.name for p in (run_dir / "errors").iterdir()) == ["env_error-ValueError.txt", "nonfinite_reward.txt"]
    assert "a grader bug" in (run_dir / "errors/env_error-ValueError.txt").read_text()
    fates = [r["fate"] for r in rows(run_dir / "rollouts.jsonl")]
    assert fates.count("trained") == 3 * 16
    assert fates.count("invalid") == sum(r["rollout/dropped_invalid_groups"] for r in steps)


def test_an_alert_above_the_invalid_rate_stops_the_run_when_asked(fresh_workers, tmp_path):
    c = config(tmp_path, "rollout.invalid_alert_rate=0.05", "rollout.stop_on_invalid=true")
    with pytest.raises(RunStopped, match=r"above rollout.invalid_alert_rate 5%.*Stopping the run \(rollout.stop_on_invalid is true\)"):
        train(c, fresh_workers(c))
    run_dir = tmp_path / "quickstart"
    [row] = [r for r in rows(run_dir / "metrics.jsonl") if r["step"] == 1]  # the step that stopped the run is logged
    [alert] = rows(run_dir / "alerts.jsonl")
    assert alert["step"] == 1 and alert["kind"] == "invalid_episodes" and row["alerts/fired"] >= 1
    assert f"{row['rollout/invalid_frac']:.0%} of this step's episodes were invalid" in alert["message"]


def test_a_health_alert_in_alerts_stop_on_stops_the_run(fresh_workers, tmp_path):
    # no step can pass its best reward/mean by 1.0: stagnation starts one step after the first
    more = "eval.environments={add4: {name: arithmetic, env_args: {digits: 4}, eval_size: 12}}"  # and a second held-out set
    c = config(
        tmp_path, "task.name=arithmetic", "alerts.stagnation_steps=1", "alerts.stagnation_delta=1.0", "alerts.stop_on=[reward_stagnation]", more
    )
    with pytest.raises(RunStopped, match=r"reward stagnation: .* in 1 steps Stopping the run \(alerts.stop_on has reward_stagnation\)"):
        train(c, fresh_workers(c))
    run_dir = tmp_path / "quickstart"
    logged = rows(run_dir / "metrics.jsonl")
    assert [r["step"] for r in logged] == [0, 1, 2] and not undocumented_metrics(logged)
    assert 0.0 <= logged[0]["eval/add4/accuracy"] <= 1.0 and "eval/accuracy" in logged[0]
    assert [(a["step"], a["kind"]) for a in rows(run_dir / "alerts.jsonl")] == [(2, "reward_stagnation")]
