"""TRL reward functions, written as TRL's documentation writes them (trl_style_rewards.py), called as TRL calls
them and combined with the rest of the reward pipeline."""

import asyncio
from pathlib import Path

import pytest
import trl_style_rewards as trl_fns

from flywheel.config import ConfigError, load_config
from flywheel.preflight import load_run_config
from flywheel.rewards.pipeline import RewardPipeline, Scorer
from flywheel.rewards.trl_functions import call_trl_function, trl_arguments, trl_scorer
from flywheel.rewards.wiring import task_scores

HERE = Path(__file__).resolve().parent


def task(prompt, answer="", reward=0.0, ids=(), **columns):
    """A task record as the rollout gives it to the pipeline (rollout/stream.py task_record) for a dataset row."""
    return {
        "prompt": prompt,
        "answer": answer,
        "columns": {"answer": answer, **columns},
        "reward": reward,
        "model_turns": [],
        "completion_ids": list(ids),
    }


def chat_task(messages, **columns):
    return {**task(messages[-1]["content"], **columns), "messages": messages}


def run(coroutine):
    return asyncio.run(coroutine)


def test_standard_format_passes_strings_ids_and_columns():
    tasks = [task("The sky is", ids=[6303, 13], ground_truth="2"), task("The sun is", ids=[304, 279, 12884, 13], ground_truth="5")]
    kwargs = trl_arguments([" blue.", " in the sky."], tasks)
    assert kwargs["prompts"] == ["The sky is", "The sun is"] and kwargs["completions"] == [" blue.", " in the sky."]
    assert kwargs["completion_ids"] == [[6303, 13], [304, 279, 12884, 13]] and kwargs["trainer_state"] is None
    assert kwargs["ground_truth"] == ["2", "5"] and kwargs["answer"] == ["", ""]
    # TRL's documented values: 2 and 4 tokens; 6 and 12 characters
    assert run(call_trl_function(trl_fns.token_length_reward, "n", [" blue.", " in the sky."], tasks)) == [2.0, 4.0]
    assert run(call_trl_function(trl_fns.char_length_reward, "n", [" blue.", " in the sky."], tasks)) == [6.0, 12.0]


def test_reference_column_as_keyword_argument():
    tasks = [task("Solve 2x + 3 = 7.", ground_truth="2"), task("Solve 3x - 5 = 10.", ground_truth="5")]
    completions = [r" The solution is \boxed{2}.", r" The solution is \boxed{6}."]
    assert run(call_trl_function(trl_fns.boxed_reward, "boxed_reward", completions, tasks)) == [1.0, 0.0]


def test_conversational_format_wraps_completions_as_assistant_messages():
    messages = [{"role": "user", "content": "What is the result of (1 + 2) * 4?"}]
    tasks = [chat_task(messages), chat_task(messages)]
    completions = ["<think>3 times 4 is 12.</think><answer>(1 + 2) * 4 = 12</answer>", "It is 12."]
    kwargs = trl_arguments(completions, tasks)
    assert kwargs["prompts"] == [messages, messages]
    assert kwargs["completions"][0] == [{"role": "assistant", "content": completions[0]}]
    assert run(call_trl_function(trl_fns.format_reward_func, "format_reward_func", completions, tasks)) == [1.0, 0.0]


def test_none_adds_nothing_and_is_left_out_of_the_mean():
    # rows: a math task answered right (1), a code task (None from the math function), a math task answered wrong (-1)
    tasks = [
        task("What is 2+2?", reward=1.0, task="math"),
        task("Write add.", reward=0.5, task="code"),
        task("What is 3*4?", reward=0.0, task="math"),
    ]
    pipeline = RewardPipeline(scorers=[Scorer("task", task_scores), trl_scorer(trl_fns.math_reward_func, "math_reward_func", weight=0.5)])
    result = run(pipeline.score(["4", "def add(a, b): ...", "7"], tasks))
    # totals: 1 + 0.5 * 1 = 1.5; 0.5 + nothing = 0.5; 0 + 0.5 * -1 = -0.5
    assert result.rewards == [1.5, 0.5, -0.5]
    assert result.metrics["reward/math_reward_func/mean"] == 0.0  # (1 + -1) / 2, the None left out
    assert result.metrics["reward/task/mean"] == 0.5  # (1 + 0.5 + 0) / 3


def test_a_function_that_applies_to_nothing_reports_no_mean():
    tasks = [task("Write add.", task="code")]
    pipeline = RewardPipeline(scorers=[Scorer("task", task_scores), trl_scorer(trl_fns.math_reward_func, "math_reward_func")])
    result = run(pipeline.score(["def add(a, b): ..."], tasks))
    assert result.rewards == [0.0] and "reward/math_reward_func/mean" not in result.metrics


def test_weights_combine_several_functions_and_async_ones():
    tasks = [task("The sky is", ids=[1, 2, 3], reward=1.0), task("The sun is", ids=[4], reward=0.0)]
    scorers = [
        Scorer("task", task_scores),
        trl_scorer(trl_fns.token_length_reward, "token_length_reward", weight=0.25),
        trl_scorer(trl_fns.async_reward_func, "async_reward_func", weight=-2.0),
    ]
    result = run(RewardPipeline(scorers=scorers).score([" blue.", ""], tasks))
    # 1 + 0.25 * 3 - 2 * 1 = -0.25; 0 + 0.25 * 1 - 2 * 0 = 0.25
    assert result.rewards == [-0.25, 0.25]
    assert result.metrics["reward/token_length_reward/mean"] == 2.0 and result.metrics["reward/async_reward_func/mean"] == 0.5


def test_a_wrong_number_of_scores_is_one_sentence():
    with pytest.raises(ValueError, match=r"^reward function 'bad' must return a list of 2 floats or None, one per completion; it returned \[1.0\]$"):
        run(call_trl_function(lambda completions, **kwargs: [1.0], "bad", ["a", "b"], [task("x"), task("y")]))


def test_nan_counts_as_none_as_in_trl():
    assert run(call_trl_function(lambda completions, **kwargs: [float("nan"), 2], "f", ["a", "b"], [task("x"), task("y")])) == [None, 2.0]


def test_config_takes_plain_names_or_names_with_weights(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    config = load_config(None, ["reward.functions=[trl_style_rewards:format_reward_func, {name: trl_style_rewards:char_length_reward, weight: 0.5}]"])
    assert [(f.name, f.metric, f.weight) for f in config.reward.functions] == [
        ("trl_style_rewards:format_reward_func", "format_reward_func", 1.0),
        ("trl_style_rewards:char_length_reward", "char_length_reward", 0.5),
    ]
    file_form = load_config(None, [f"reward.functions=[{HERE / 'trl_style_rewards.py'}:async_reward_func]"])
    assert file_form.reward.functions[0].metric == "async_reward_func"


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        ("[no_such_module_here:f]", "reward.functions: cannot import 'no_such_module_here' for 'no_such_module_here:f' (ModuleNotFoundError"),
        ("[trl_style_rewards:nope]", "reward.functions: 'trl_style_rewards' has no function 'nope' (for 'trl_style_rewards:nope')"),
        ("[format_reward_func]", "reward.functions: 'format_reward_func' is not of the form 'module:function' or 'path/to/file.py:function'"),
        ("[a:task]", "reward.functions: the name 'task' is taken (metrics are reward/<function name>/mean); rename the function"),
    ],
)
def test_bad_functions_are_one_sentence(monkeypatch, functions, message):
    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(ConfigError) as error:
        load_run_config(None, [f"reward.functions={functions}"])
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
