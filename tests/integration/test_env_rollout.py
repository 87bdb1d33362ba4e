"""Multi-turn rollout against the real vLLM engine actor (tiny adder model, no chat template: plain-text turns)."""

import asyncio
import math
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import make_env
from flywheel.rewards.exact import exact_match_reward
from flywheel.rollout.group import episode_metrics, run_group

ROOT = Path(__file__).resolve().parents[2]


class Retry:
    """Asks again (the prompt as feedback) after a wrong answer, up to max_turns; counts each answer as a 'tool call'."""

    system_prompt, tools, stop = None, (), ()

    def __init__(self, max_turns: int = 3, time_limit_s: float = 60.0, step_delay_s: float = 0.0) -> None:
        self.max_turns, self.time_limit_s, self.step_delay_s = max_turns, time_limit_s, step_delay_s

    def tasks(self, size: int, seed: int) -> list[Task]:
        return []

    def reset(self, task: Task) -> str:
        self.task = task
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        time.sleep(self.step_delay_s)
        wrong = not model_text.strip().isdigit()
        if exact_match_reward(model_text, self.task.answer):
            return final(1.0, tool_calls=1, tool_errors=0)
        return StepResult(self.task.prompt, None, False, {"tool_calls": 1, "tool_errors": int(wrong)})


@pytest.fixture(scope="module")
def tokenizer(config):
    return AutoTokenizer.from_pretrained(ROOT / config.model.path)


def test_multi_turn_episodes_append_env_turns_with_zero_mask(initial_engine, tokenizer):
    task = Task("123+456=", "999999")  # never right: every episode runs max_turns turns
    episodes = asyncio.run(run_group(initial_engine, tokenizer, lambda: Retry(max_turns=3), task, n=8, temperature=1.0, max_tokens=8, seed=5))
    prompt = tokenizer.encode("123+456=")
    for e in episodes:
        assert e.prompt_ids == prompt and e.reward == 0.0
        mask, ids = e.completion.loss_mask, e.completion.token_ids
        assert len(mask) == len(ids) == len(e.completion.logprobs) == len(e.completion.weight_versions)
        if e.stop_reason == "truncated":  # a turn used all 8 tokens without end-of-sequence
            continue
        assert e.stop_reason == "max_turns" and e.turns == 3 and e.tool_calls == 3
        # model turn, then the prompt again with mask 0 and logprob 0, twice, then the last model turn
        turns, env = [], []
        for token, m in zip(ids, mask):
            (turns if m else env).append(token)
        assert env == prompt * 2
        assert all(lp == 0.0 for lp, m in zip(e.completion.logprobs, mask) if not m)
        assert all(lp < 0 or math.isclose(lp, 0, abs_tol=1e-6) for lp, m in zip(e.completion.logprobs, mask) if m)
        assert [ids[i] for i in range(len(ids)) if mask[i] and ids[i] == tokenizer.eos_token_id] == [tokenizer.eos_token_id] * 3
        version = e.completion.weight_version  # the engine's (earlier tests moved it); the same on every model token
        assert e.completion.weight_versions == tuple(version if m else None for m in mask)
        assert (
            e.messages[1::2] == ({"role": "user", "content": "123+456="},) * 2 or e.messages[2::2] == ({"role": "user", "content": "123+456="},) * 2
        )
    assert sum(e.stop_reason == "max_turns" for e in episodes) >= 6  # the adder ends its answers within 8 tokens
    metrics = episode_metrics(episodes)
    assert metrics["env/turns_mean"] == sum(e.turns for e in episodes) / 8
    assert metrics["tools/calls_per_episode"] == metrics["env/turns_mean"]


def test_the_time_limit_ends_episodes(initial_engine, tokenizer):
    def slow() -> Retry:
        return Retry(max_turns=5, time_limit_s=1.0, step_delay_s=3.0)

    async def timed():  # asyncio.run itself then waits for the abandoned step threads to finish
        t0 = time.monotonic()
        episodes = await run_group(initial_engine, tokenizer, slow, Task("1+1=", "2"), n=4, temperature=1.0, max_tokens=8, seed=0)
        return episodes, time.monotonic() - t0

    episodes, seconds = asyncio.run(timed())
    assert 1.0 <= seconds < 2.0  # its steps alone would take 3 s
    # the environment outlived the limit: its episodes are invalid (left out of the advantages), not scored 0
    assert [(e.stop_reason, e.error, e.valid) for e in episodes] == [("env_timeout", "env_timeout", False)] * 4
    assert all("did not answer within the episode's time limit" in str(e.failure) for e in episodes)


def test_many_groups_in_flight_score_like_the_arithmetic_env(initial_engine, tokenizer):
    env = make_env("arithmetic")
    tasks = env.tasks(64, seed=0)

    async def all_groups():
        return await asyncio.gather(
            *(run_group(initial_engine, tokenizer, lambda: make_env("arithmetic"), t, 8, 1.0, 8, 100 + 8 * k) for k, t in enumerate(tasks))
        )

    groups = asyncio.run(all_groups())
    episodes = [e for g in groups for e in g]
    # one-turn fast path: one request of 8 per group, every token the model's (loss_mask None)
    assert len(episodes) == 512 and all(e.turns == 1 and e.completion.loss_mask is None and e.valid for e in episodes)
    for task, group in zip(tasks, groups):
        assert all(e.reward == exact_match_reward(e.completion.text, task.answer) for e in group)
    mean = sum(e.reward for e in episodes) / 512
    assert 0.15 < mean < 0.6  # the shipped model answers about a third of them (README: 0.305 on held-out problems)


def test_stop_strings_end_a_turn_and_stay_in_it(initial_engine, tokenizer):
    prompts = [tokenizer.encode(f"{a}+{a}=") for a in (125, 250, 375, 455)]
    groups = asyncio.run(initial_engine.generate(prompts, 8, 1.0, 8, 0, ["5"]))
    stopped = [c for g in groups for c in g if "5" in c.text]
    assert len(stopped) > 4
    for c in stopped:
        assert c.text.endswith("5") and c.text.count("5") == 1 and not c.truncated
        assert c.token_ids[-1] == tokenizer.convert_tokens_to_ids("5")
