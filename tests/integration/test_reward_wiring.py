"""The reward pipeline inside the training loop: exact answer + a reward model in its own Ray actor + an LLM
judge on a vLLM engine of its own + guards."""

import json
from pathlib import Path

from helpers import SYNC
from tiny_models import save_causal_lm, save_classifier

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]


def test_rewards_compose_and_every_sub_score_is_logged(fresh_workers, tmp_path):
    model, judge = save_classifier(tmp_path / "reward-model"), save_causal_lm(tmp_path / "judge")
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.progress=false",
            "run.steps=2",
            "rollout.prompts_per_step=8",
            "eval.every=100",
            f"run.output_dir={tmp_path}",
            f"reward.reward_model.path={model}",
            "reward.reward_model.weight=0.5",
            "reward.guards=[length_padding,judge_injection]",
            "reward.judge.enabled=true",
            "reward.judge.engine=own",
            f"reward.judge.model_path={judge}",
            "reward.judge.weight=0.25",
            "reward.judge.max_tokens=4",
        ],
    )
    run_dir = train(config, fresh_workers(config))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    for row in rows:
        # reward = the task's exact-answer grade + 0.5 * reward model + 0.25 * judge; the judge here is a
        # random model on a vLLM engine of its own in the run, its replies cut at 4 tokens inside the verdict's
        # schema: they never parse, score 0 and are counted
        assert row["judge/parse_fail_rate"] == 1.0 and row["reward/judge/mean"] == 0.0
        assert abs(row["reward/mean"] - (row["reward/task/mean"] + 0.5 * row["reward/reward_model/mean"])) < 1e-5, row
        assert row["reward/reward_model/mean"] != 0.0
        assert row["hacking/length_padding_rate"] == 0.0 and row["hacking/judge_injection_rate"] == 0.0
