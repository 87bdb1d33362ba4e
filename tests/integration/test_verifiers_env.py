"""verifiers environments (built with verifiers' own API in verifiers_envs.py) through flywheel's rollout and
loop: the tokens are the engine's and the chat template's, the reward is the environment's rubric."""

import asyncio
import json
import re
from pathlib import Path

import pytest
import verifiers as vf
import yaml
from helpers import undocumented_metrics
from transformers import AutoTokenizer

from flywheel.cluster.workers import engine_group, start_engines
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.envs.registry import make_env
from flywheel.rollout.group import episode_metrics, run_group

REPO = Path(__file__).resolve().parents[2]
CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def run(engine, tokenizer, load: str, prompt: str, n: int, max_tokens: int, seed: int):
    """n episodes of the task whose user message is ``prompt``, and the environment of each."""
    envs = []

    def factory():
        envs.append(make_env("verifiers", load=load))
        return envs[-1]

    [task] = [t for t in make_env("verifiers", load=load).splits(10, 0, seed=0)[0] if t.prompt == prompt]
    episodes = asyncio.run(run_group(engine, tokenizer, factory, task, n=n, temperature=1.0, max_tokens=max_tokens, seed=seed))
    return task, episodes, envs


def rescored(env, task, episode) -> tuple[float, dict]:
    """verifiers' rubric on a new state holding flywheel's transcript of the episode (tool calls read from its text)."""
    completion = []
    for m in episode.messages[1:]:
        if m["role"] == "assistant":
            calls = [json.loads(body) for body in CALL.findall(m["content"])]
            tool_calls = [vf.ToolCall(id=str(k), name=c["name"], arguments=json.dumps(c["arguments"])) for k, c in enumerate(calls)]
            completion.append(
                vf.AssistantMessage(content=CALL.sub("", m["content"]).strip() if calls else m["content"], tool_calls=tool_calls or None)
            )
        else:
            completion.append(vf.ToolMessage(tool_call_id="0", content=m["content"]))
    state = vf.State(input=dict(task.metadata["verifiers_input"]))
    state.update(completion=completion, trajectory=[{}] * episode.turns)
    asyncio.run(env.env.rubric.score_rollout(state))
    return state["reward"], state["metrics"]


def test_single_turn_env_scores_the_sampled_tokens(shared_engine):
    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets/tiny-adder")  # no chat template: plain text
    task, episodes, envs = run(shared_engine, tokenizer, "verifiers_envs:adder", "123+456=", n=8, max_tokens=8, seed=11)
    for episode, env in zip(episodes, envs):
        seen = env.output
        text = episode.completion.text
        assert episode.prompt_ids == tokenizer.encode("123+456=") and seen["prompt"][-1]["content"] == "123+456="
        assert tokenizer.decode(episode.completion.token_ids, skip_special_tokens=True) == text == seen["completion"][-1]["content"]
        assert episode.reward == 1.0 * (text.strip() == "579") + 0.25 * text.strip().isdigit() == seen["reward"]
        assert (episode.reward, episode.scores) == rescored(env, task, episode)
    metrics = episode_metrics(episodes, tools=False)
    assert metrics["env/score/exact_answer"] == sum(e.scores["exact_answer"] for e in episodes) / 8
    assert metrics["env/score/num_turns"] == 1.0


@pytest.fixture
def calc_engine(shared_engine):
    """An engine for tiny-calc (the calculator's tool-calling model), for this test only."""
    [engine] = start_engines(engine_group(load_config(REPO / "configs/calculator.yaml", ["run.progress=false"])))
    yield engine
    engine.shutdown()


def test_tool_env_turns_are_the_templates_with_loss_mask_zero(calc_engine):
    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets/tiny-calc")
    task, episodes, envs = run(calc_engine, tokenizer, "verifiers_envs:products", "What is 347*582?", n=8, max_tokens=96, seed=5)
    tool_turns = 0
    for episode, env in zip(episodes, envs):
        ids, mask = episode.completion.token_ids, episode.completion.loss_mask
        conversation = tokenizer.decode(episode.prompt_ids + ids)
        # the whole sequence is the chat template's rendering of the conversation verifiers saw
        assert tokenizer.apply_chat_template(list(episode.messages), tokenize=False).startswith(conversation)
        assert tokenizer.decode(episode.prompt_ids) == "<|im_start|>user\nWhat is 347*582?<|im_end|>\n<|im_start|>assistant\n"
        model_tokens = tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True)
        assert model_tokens == "".join(episode.model_turns)
        env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
        tools = [m["content"] for m in episode.messages if m["role"] == "tool"]
        assert env_text == "".join(f"<|im_end|>\n<|im_start|>tool\n{content}<|im_end|>\n<|im_start|>assistant\n" for content in tools)
        assert all(lp == 0.0 for lp, m in zip(episode.completion.logprobs, mask) if not m)
        tool_turns += len(tools)
        if episode.stop_reason != "done":  # flywheel ended it first (a turn cut by max_tokens): scored 0, not by verifiers
            assert episode.reward == 0.0 and episode.stop_reason in ("truncated", "max_turns")
            continue
        seen = env.output
        assert [m["content"] for m in seen["completion"] if m["role"] == "tool"] == tools  # the tool's own results
        assert (episode.reward, episode.scores) == rescored(env, task, episode)
        assert episode.reward == seen["reward"] == 1.0 * (episode.model_turns[-1].strip() == "201954") + 0.2 * bool(tools)
        # flywheel counts every <tool_call> block, verifiers the well-formed ones (a malformed one is text, as from vLLM's tool parser)
        assert episode.tool_calls - episode.tool_errors == episode.scores["total_tool_calls"] == len(tools)
    assert tool_turns > 0


def test_two_training_steps_on_a_verifiers_tool_env(shared_engine, tmp_path):  # its own engine and trainer
    config = {
        "model": {"path": str(REPO / "assets/tiny-calc")},
        "task": {"name": "verifiers", "env_args": {"load": "verifiers_envs:products"}, "train_size": 4, "eval_size": 2, "seed": 0},
        "rollout": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 96},
        "trainer": {"lr": 2.0e-4},
        "eval": {"every": 2},
        "run": {"name": "verifiers", "steps": 2, "checkpoint_every": 2, "progress": False, "output_dir": str(tmp_path)},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [json.loads(line) for line in (train(load_config(tmp_path / "config.yaml")) / "metrics.jsonl").read_text().splitlines()]
    trained = [row for row in rows if "reward/mean" in row]  # (step 0 is the first evaluation)
    assert [row["step"] for row in trained] == [1, 2] and not undocumented_metrics(rows), undocumented_metrics(rows)
    for row in trained:
        assert 0 <= row["env/score/exact_answer"] <= 1 and 1 <= row["env/score/num_turns"] <= 3 and row["env/turns_mean"] >= 1
        assert 0 <= row["reward/mean"] <= 1.2 and row["train/mismatch_kl"] < 1e-3  # tool tokens are in the sequences, not in the loss
    assert 0 <= rows[-1]["eval/env/score/used_a_tool"] <= 1 and rows[-1]["eval/env/score/total_tool_calls"] >= 0
