"""flywheel's ``verifiers`` environment driven turn by turn with given model texts (no engine): verifiers'
own environments (tests/integration/verifiers_envs.py) run unchanged, their rubric gives the reward."""

import asyncio
import gc
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from flywheel.envs.registry import make_env  # noqa: E402
from flywheel.envs.verifiers_env import _episode_loop  # noqa: E402


def call(arguments: str) -> str:
    return f'<tool_call>{{"name": "calculate", "arguments": {arguments}}}</tool_call>'


def test_single_turn_reward_is_the_weighted_rubric():
    env = make_env("verifiers", load="verifiers_envs:adder")
    train, held_out = env.splits(10, 5, seed=0)
    # the dataset's 4 rows for training, the eval_dataset's 2 rows held out, each once
    assert sorted(t.prompt for t in train) == ["12+34=", "123+456=", "250+250=", "5+7="]
    assert sorted(t.prompt for t in held_out) == ["7+8=", "99+1="]
    assert env.max_turns == 1 and env.tools == () and env.system_prompt is None
    task = next(t for t in train if t.prompt == "12+34=")
    assert task.answer == "46"
    for text, reward, exact, digits in [("46", 1.25, 1.0, 1.0), (" 46\n", 1.25, 1.0, 1.0), ("47", 0.25, 0.0, 1.0), ("4 6", 0.0, 0.0, 0.0)]:
        episode = make_env("verifiers", load="verifiers_envs:adder")
        assert episode.reset(task) == "12+34="
        result = episode.step(text)
        # 1.0 * exact_answer + 0.25 * digits_only; num_turns is verifiers' 0-weight metric
        assert result.done and result.reward == reward
        assert result.info["scores"] == {"exact_answer": exact, "digits_only": digits, "num_turns": 1.0}
        assert episode.output["completion"][-1]["content"] == text


def test_tool_env_turns_are_tool_messages():
    env = make_env("verifiers", load="verifiers_envs:products")
    assert env.max_turns == 3 and env.stop == ("</tool_call>",) and [t.name for t in env.tools] == ["calculate"]
    assert env.tools[0].schema()["function"]["parameters"]["required"] == ["expression"]
    [task] = [t for t in env.splits(6, 0, seed=0)[0] if t.prompt == "What is 12*34?"]
    assert env.reset(task) == "What is 12*34?"
    tool_turn = env.step(call('{"expression": "12*34"}'))
    assert (tool_turn.done, tool_turn.role, tool_turn.observation) == (False, "tool", ["408"])
    assert tool_turn.info == {"tool_calls": 1, "tool_errors": 0}
    failing = env.step(call('{"expression": "12+34"}'))  # the tool raises: ToolEnv's error message is the result
    assert failing.role == "tool" and failing.observation == ["not enough values to unpack (expected 2, got 1)"]
    last = env.step("408")
    # 1.0 * exact_answer + 0.2 * used_a_tool; ToolEnv's metrics count the calls
    assert last.done and last.reward == 1.2
    assert last.info["scores"] == {"exact_answer": 1.0, "used_a_tool": 1.0, "num_turns": 3.0, "total_tool_calls": 2.0, "calculate_calls": 2.0}
    [first_call, *_] = env.output["completion"]
    assert json.loads(first_call["tool_calls"][0]) == {"id": "turn1_0", "name": "calculate", "arguments": '{"expression": "12*34"}'}


def test_multi_turn_feedback_is_a_user_turn_and_max_turns_ends_it():
    env = make_env("verifiers", load="verifiers_envs:feedback", args={"system_prompt": "Add."})
    assert env.system_prompt == "Add." and env.max_turns == 3
    [task] = [t for t in env.splits(6, 0, seed=1)[0] if t.prompt == "5+7="]
    env.reset(task)
    for _ in range(2):
        turn = env.step("13")
        assert (turn.done, turn.role, turn.observation) == (False, "user", ["wrong, try again"])
    last = env.step("11")  # verifiers' max_turns stop: scored as the rubric says (0 here)
    assert last.done and last.reward == 0.0 and env.output["stop_condition"] == "max_turns_reached"
    right = make_env("verifiers", load="verifiers_envs:feedback", args={"system_prompt": "Add."})
    right.reset(task)
    assert right.step("12").reward == 1.0 and right.output["stop_condition"] == "answered"


def test_an_abandoned_episode_stops_waiting():
    env = make_env("verifiers", load="verifiers_envs:feedback")
    [task, *_] = env.splits(6, 0, seed=1)[0]

    async def running() -> int:
        return len(asyncio.all_tasks()) - 1  # minus this one

    env.reset(task)
    env.step("0")  # waits for its second model turn, which flywheel never samples (e.g. a truncated turn)
    loop = _episode_loop()
    assert asyncio.run_coroutine_threadsafe(running(), loop).result() == 1
    del env
    gc.collect()
    for _ in range(100):
        if asyncio.run_coroutine_threadsafe(running(), loop).result() == 0:
            break
    assert asyncio.run_coroutine_threadsafe(running(), loop).result() == 0


def test_unsupported_environments_fail_with_one_sentence():
    with pytest.raises(ValueError, match="must be 'module:function'"):
        make_env("verifiers", load="verifiers_envs.adder")
    with pytest.raises(TypeError, match="not a verifiers Environment"):
        make_env("verifiers", load="verifiers_envs:calculate", args={"expression": "1*2"})
    env = make_env("verifiers", load="verifiers_envs:few_shot")
    with pytest.raises(ValueError, match=r"must be \['user'\] with the environment's system_prompt, got roles \['user', 'assistant', 'user'\]"):
        env.splits(2, 0, seed=0)
