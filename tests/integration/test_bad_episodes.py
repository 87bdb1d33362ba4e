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
from flywheel.rewards.faults import UserFunctionBug

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


FAULTY = REPO / "tests/faulty_user_code.py"


def test_reward_functions_that_raise_or_time_out_fail_their_groups_only(fresh_workers, tmp_path):
    # raises for prompts whose first digit is 3, 6 or 9; sleeps 3 s (past the 1 s limit) for 1 and 2
    functions = f"reward.functions=['{FAULTY}:raises_on_some_prompts', '{FAULTY}:slow_on_some_prompts']"
    c = config(tmp_path, "task.name=arithmetic", "run.steps=2", "rollout.prompts_per_step=8", functions, "reward.function_timeout_s=1")
    run_dir = train(c, fresh_workers(c))
    steps = rows(run_dir / "metrics.jsonl")[1:]
    assert [r["step"] for r in steps] == [1, 2] and not undocumented_metrics(steps)
    assert sum(r["reward/errors"] for r in steps) > 0 and sum(r["reward/timeouts"] for r in steps) > 0
    assert all(r["reward/errors"] % 8 == 0 and r["reward/timeouts"] % 8 == 0 for r in steps)  # a call fails its whole group
    assert sorted(p.name for p in (run_dir / "errors").iterdir()) == ["reward_error-ZeroDivisionError.txt", "reward_timeout-TimeoutError.txt"]
    assert (
        "reward function 'raises_on_some_prompts' raised ZeroDivisionError: a reward function bug"
        in (run_dir / "errors/reward_error-ZeroDivisionError.txt").read_text()
    )
    assert len([g for g in rows(run_dir / "rollouts.jsonl") if g["fate"] == "trained"]) == 2 * 8


@pytest.mark.parametrize(
    "overrides, bug",
    [
        ([f"reward.functions=['{FAULTY}:returns_text']"], "reward function 'returns_text' must return a list of 8 floats or None, one per completion; it returned ['1.0', '1.0', '1.0', '1.0', '1.0', '1.0', '1.0', '1.0']"),
        (
            ["task.name=dataset", "task.env_args={}", f"task.dataset={REPO / 'assets/word-problems/test.jsonl'}", "task.eval_size=4",
             "task.prompt_column=question", "task.reference_extraction=gsm8k", f"task.grader={FAULTY}:grader_returns_text"],
            f"task.grader '{FAULTY}:grader_returns_text' must return a number (the reward); it returned 'correct'",
        ),
    ],
)  # fmt: skip
def test_a_function_returning_the_wrong_type_stops_the_run_at_its_first_call(fresh_workers, tmp_path, overrides, bug):
    c = config(tmp_path, "task.name=arithmetic", "run.steps=2", "rollout.prompts_per_step=4", "eval.every=100", *overrides)
    with pytest.raises(UserFunctionBug) as info:
        train(c, fresh_workers(c))
    assert str(info.value) == bug
    assert [r["step"] for r in rows(tmp_path / "quickstart/metrics.jsonl")] == [0]  # the evaluation before step 1; no step trained


def test_a_corrupt_checkpoint_is_named_and_the_resume_falls_back_to_the_newest_sound_one(fresh_workers, tmp_path, capfd):
    c = config(tmp_path, "task.name=arithmetic", "run.steps=2", "rollout.prompts_per_step=4", "run.checkpoint_every=1", "run.dump_rollouts=false")
    run_dir = train(c, fresh_workers(c))
    state = run_dir / "checkpoints/step_2/trainer_state.pt"
    state.write_bytes(state.read_bytes()[:100])  # a write cut short
    capfd.readouterr()
    resumed = config(tmp_path, "task.name=arithmetic", "run.steps=3", "rollout.prompts_per_step=4", "run.checkpoint_every=1", f"run.resume={run_dir}",
                     "run.dump_rollouts=false")  # fmt: skip
    assert train(resumed, fresh_workers(resumed)) == run_dir
    err = capfd.readouterr().err
    assert f"flywheel: checkpoint {run_dir}/checkpoints/step_2 is corrupt (trainer_state.pt cannot be loaded: " in err
    assert f"; resuming from {run_dir}/checkpoints/step_1 instead" in err
    assert [r["step"] for r in rows(run_dir / "metrics.jsonl")] == [0, 1, 2, 3]  # step 2 trained again from step 1's checkpoint
