"""``flywheel check-reward`` and ``reward.check``: the configured reward scores honest and adversarial completions of
real tasks, no engine started. A reward that reads one committed answer pays no adversarial form; a user function that
looks for the reference anywhere pays candidate lists and hedges, and the check says so (and stops a run when asked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import ConfigError
from flywheel.envs.arithmetic import ArithmeticEnv
from flywheel.envs.registry import register_env
from flywheel.preflight import load_run_config
from flywheel.reward_check import check_at_start, check_reward
from flywheel.rewards.answer_form import canonical
from flywheel.rewards.extraction import extract_answer
from flywheel.rewards.graders import make_grader
from flywheel.rewards.probes import adversarial_probes, distractors, honest_notations, honest_wrappers

REPO = Path(__file__).resolve().parents[2]
WORD_PROBLEMS = [
    f"task.dataset={REPO}/assets/word-problems/train.jsonl", f"task.eval_dataset={REPO}/assets/word-problems/test.jsonl",
    f"model.path={REPO}/assets/tiny-calc", "rollout.max_new_tokens=16",
]  # fmt: skip
RECIPE = REPO / "configs/qwen2.5-0.5b-gsm8k.yaml"
ANYWHERE = "reward.functions=['trl_style_rewards:answer_anywhere_reward']"
REFERENCES = ["24", "-7", "1234", "0.5", "19/12", "-\\frac{1}{2}", "1000000"]


@pytest.mark.parametrize("reference", REFERENCES)
def test_no_adversarial_probe_puts_the_reference_where_one_answer_is_read(reference):
    """The probes are adversarial for a reward that reads a gameable place, not for one that reads the committed
    answer: the last box, the last number, the #### line and a bare answer never hold the reference alone."""
    wrong = distractors(reference, [])
    assert reference not in wrong and len(set(wrong)) == 2
    for wrap_name, rule in (("boxed", "boxed"), ("bare", "last_number"), ("gsm8k", "gsm8k"), ("bare", "whole")):
        for probe in adversarial_probes("What is the answer?", reference, honest_wrappers()[wrap_name], wrong):
            read = extract_answer(probe.text, rule)
            assert read is None or canonical(read) != canonical(reference), (probe.family, probe.text, rule)


@pytest.mark.parametrize("reference", REFERENCES)
def test_the_math_grader_pays_every_honest_notation_and_no_adversarial_form(reference):
    grade = make_grader("math", {})
    wrap = honest_wrappers()["bare"]
    for probe in honest_notations(reference, wrap):
        assert grade(canonical(probe.text), reference, {}) == 1.0, probe
    for probe in adversarial_probes("What is the answer?", reference, wrap, distractors(reference, [])):
        assert grade(probe.text, reference, {}) == 0.0, probe


def test_distractors_of_a_text_answer_are_other_tasks_references():
    assert distractors("Paris", ["Paris", "paris", "Rome", "Oslo"]) == ("Rome", "Oslo")
    assert distractors("Paris", []) == ("Paris not", "not Paris")


def test_the_quickstart_reward_pays_no_adversarial_form_and_reads_only_bare_digits():
    result = check_reward(load_run_config(REPO / "configs/quickstart.yaml"), tasks=8)
    assert result.conclusive and result.wrapper == "bare" and (result.honest, result.wrong) == (1.0, 0.0)
    assert result.paying == [] and result.warnings() == []
    # the arithmetic environment is an exact match: "579." is an honest answer it does not pay, and the report says so
    assert "period" in [f.family for f in result.undergraded]
    assert "UNDER-GRADED" in result.report() and "verdict: 0 adversarial forms pay" in result.report()


def test_a_reward_function_that_finds_the_reference_anywhere_pays_candidate_lists_and_the_check_says_so():
    gameable = check_reward(load_run_config(RECIPE, [*WORD_PROBLEMS, ANYWHERE]), tasks=8)
    paying = {f.family for f in gameable.paying}
    assert {"candidates", "hedge", "several_answers", "mention"} <= paying
    assert not paying & {"wrong", "empty", "whitespace", "unevaluated_sum", "injection"}
    assert any("'candidates' earns" in line for line in gameable.warnings())
    # the shipped recipe's own reward (math grader, last box) pays none and under-grades no honest notation
    recipe = check_reward(load_run_config(RECIPE, WORD_PROBLEMS), tasks=8)
    assert recipe.wrapper == "boxed" and recipe.paying == [] and recipe.undergraded == []


def test_a_judge_on_the_run_engines_is_named_as_not_checked():
    config = load_run_config(REPO / "configs/quickstart.yaml", ["reward.judge.enabled=true", "reward.judge.engine=policy"])
    result = check_reward(config, tasks=2)
    assert any("reward.judge.engine: policy" in line for line in result.not_checked)


def test_tasks_without_a_reference_are_checked_on_the_forms_that_need_none():
    config = load_run_config(None, ["task.name=python_code"])
    result = check_reward(config, tasks=2)
    assert [f.family for f in result.forms] == ["empty", "whitespace", "echo"] and all(f.mean == 0.0 for f in result.forms)
    assert not result.conclusive and result.warnings() == [] and "no reference answer" in result.report()


def test_reward_check_stop_refuses_a_gameable_reward_in_one_sentence_and_warn_warns(capsys):
    with pytest.raises(
        ConfigError, match=r"^reward check: the adversarial form '\w+' earns .* \(reward.check is stop; set it to warn to train anyway\)$"
    ):
        check_at_start(load_run_config(RECIPE, [*WORD_PROBLEMS, ANYWHERE, "reward.check=stop"]))
    check_at_start(load_run_config(RECIPE, [*WORD_PROBLEMS, ANYWHERE, "reward.check_tasks=2"]))
    assert "flywheel: warning: reward check: the adversarial form 'candidates' earns" in capsys.readouterr().err


def test_a_check_past_its_time_limit_is_skipped_with_a_warning(capsys):
    slow = f"reward.functions=['{REPO}/tests/faulty_user_code.py:always_slow']"
    config = load_run_config(REPO / "configs/quickstart.yaml", [slow, "reward.check_timeout_s=0.5", "reward.function_timeout_s=30"])
    check_at_start(config)
    assert "reward check did not finish within 0.5 s (reward.check_timeout_s); skipped" in capsys.readouterr().err


def test_flywheel_check_reward_on_every_shipped_config():
    """The command on each config in configs/ (the recipe on the shipped word problems: its GSM8K files and model are
    fetched by hand), and exit 1 with the table when a form pays."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests/unit"), os.environ.get("PYTHONPATH", "")])}
    overrides = {"qwen2.5-0.5b-gsm8k.yaml": WORD_PROBLEMS}
    for config in sorted((REPO / "configs").glob("*.yaml")):
        args = [sys.executable, "-m", "flywheel.cli", "check-reward", str(config), "--tasks", "8", *overrides.get(config.name, [])]
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0 and "verdict: 0 adversarial forms pay" in done.stdout, (config.name, done.stdout, done.stderr)
    args = [sys.executable, "-m", "flywheel.cli", "check-reward", str(RECIPE), *WORD_PROBLEMS, ANYWHERE]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and "candidates" in done.stdout and "PAYS" in done.stdout, done.stdout + done.stderr


@register_env("check_raising_arithmetic")
class RaisingArithmetic(ArithmeticEnv):
    """The quickstart task whose grading always raises."""

    def step(self, model_text: str):
        raise RuntimeError("a grading bug")


def test_an_environment_that_raises_on_every_probe_is_reported_so_not_as_a_gameable_reward():
    result = check_reward(load_run_config(None, ["task.name=check_raising_arithmetic"]), tasks=2)
    assert result.paying == [] and all(f.invalid == f.tasks == 2 for f in result.wrappers + result.forms)
    assert result.warnings() == [
        "reward check: every honest probe's episode was invalid (the environment or the reward failed on it), so nothing was checked"
    ]


def test_a_reward_model_is_scored_in_the_check(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "tests" / "integration"))
    from tiny_models import save_classifier

    model = save_classifier(tmp_path / "reward-model")
    result = check_reward(load_run_config(REPO / "configs/quickstart.yaml", [f"reward.reward_model.path={model}"]), tasks=2)
    # the exact-match grade of a wrong answer is 0: whatever it earns is the random classifier's logit
    assert result.not_checked == [] and result.wrong != 0.0 and len({f.mean for f in result.forms}) > 2
