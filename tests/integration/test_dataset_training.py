"""A short real run on the shipped word problems (assets/word-problems) through the shared engine: the task's numeric
grader and two TRL reward functions (tests/unit/trl_style_rewards.py) give every trained episode exactly the reward
that recomputing them from its completion gives. The tiny-adder model cannot read words (its tokenizer keeps digits,
+ and =), so this checks the plumbing, not learning."""

import json
from pathlib import Path

from helpers import SYNC, undocumented_metrics
from transformers import AutoTokenizer

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.rewards.extraction import extract_answer
from flywheel.rewards.graders import make_grader
from flywheel.rewards.user_functions import load_function
from flywheel.rollout.stream import load_tasks, prompt_indices

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS = REPO / "tests/unit/trl_style_rewards.py"
solution_accuracy_reward = load_function(f"{FUNCTIONS}:solution_accuracy_reward")  # the TRL function, as written


def test_word_problems_rewards_are_the_grader_plus_the_weighted_trl_functions(fresh_workers, tmp_path):
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.progress=false",
            "run.steps=2",
            "rollout.prompts_per_step=8",
            "eval.every=100",
            "run.dump_rollouts=true",
            f"run.output_dir={tmp_path}",
            "task.name=dataset",
            "task.env_args={}",
            f"task.dataset={REPO / 'assets/word-problems/train.jsonl'}",
            f"task.eval_dataset={REPO / 'assets/word-problems/test.jsonl'}",
            "task.eval_size=8",
            "task.prompt_column=question",
            "task.reference_extraction=gsm8k",
            "task.grader=numeric",
            "task.answer_extraction=last_number",
            f"reward.functions=[{{name: '{FUNCTIONS}:solution_accuracy_reward', weight: 0.5}}, {{name: '{FUNCTIONS}:token_length_reward', weight: 0.1}}]",
        ],
    )
    run_dir = train(config, fresh_workers(config))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert not undocumented_metrics(rows), undocumented_metrics(rows)
    assert 0.0 <= rows[0]["eval/accuracy"] <= 1.0 and rows[-1]["step"] == 2
    for row in rows[1:]:
        # reward = numeric grade + 0.5 * accuracy + 0.1 * tokens, every episode valid: the means add up the same way
        expected = row["reward/task/mean"] + 0.5 * row["reward/solution_accuracy_reward/mean"] + 0.1 * row["reward/token_length_reward/mean"]
        assert abs(row["reward/mean"] - expected) < 1e-5, row
        assert row["reward/token_length_reward/mean"] > 0

    tokenizer, tasks = AutoTokenizer.from_pretrained(config.model.path), load_tasks(config)
    groups = [json.loads(line) for line in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    trained = [g for g in groups if g["fate"] == "trained"]
    assert len(trained) == 2 * 8
    graded, numeric = [], make_grader("numeric", {})
    for group in trained:
        [index] = prompt_indices(len(tasks.train), group["position"], 1, config.run.seed)
        task = tasks.train[index]
        solution = task.metadata["columns"]["answer"]  # the answer column, worked steps and "#### N"
        for ids, reward in zip(group["token_ids"], group["rewards"]):
            text = tokenizer.decode(ids, skip_special_tokens=True)
            answer = extract_answer(text, "last_number")
            grade = numeric(answer, task.answer, {})
            [accuracy] = solution_accuracy_reward([text], answer=[solution])
            assert abs(reward - (grade + 0.5 * accuracy + 0.1 * len(ids))) < 1e-6, (text, task.answer, reward)  # float32 rewards
            graded.append(grade)
    assert len(graded) == 2 * 8 * config.rollout.group_size
