"""run_group's environment steps: every answer in order, a raise or an overrun as that episode's failure only;
the time limit of a multi-turn group, and the engine downtime it does not count."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from transformers import AutoTokenizer

from flywheel.envs.base import Task, final
from flywheel.rollout.group import EnvFailure, _Deadline, _steps, run_group
from flywheel.types import Completion

TINY = Path(__file__).resolve().parents[2] / "assets/tiny-adder"


class Env:
    def __init__(self, behaviour: str, release: threading.Event | None = None) -> None:
        self.behaviour, self.release = behaviour, release

    def step(self, text: str):
        if self.behaviour == "raise":
            raise ValueError(f"bad {text}")
        if self.behaviour == "hang":
            self.release.wait(5)
        return final(float(len(text)))


def test_steps_keep_order_and_fail_only_the_faulty_episode():
    release = threading.Event()
    envs = [Env("ok"), Env("raise"), Env("hang", release), Env("ok")]
    results = asyncio.run(_steps(envs, ["a", "bb", "ccc", "dddd"], _Deadline(2.0, None)))  # room for a loaded machine; "hang" waits 5 s
    release.set()
    assert [r.reward for r in (results[0], results[3])] == [1.0, 4.0]
    assert isinstance(results[1], EnvFailure) and results[1].reason == "env_error"
    assert str(results[1]) == "Env.step raised ValueError: bad bb"
    assert isinstance(results[1].__cause__, ValueError)
    assert isinstance(results[2], EnvFailure) and results[2].reason == "env_timeout"


def test_steps_after_the_deadline_all_time_out():
    results = asyncio.run(_steps([Env("ok"), Env("ok")], ["a", "b"], _Deadline(-1, None)))
    assert [r.reason for r in results] == ["env_timeout", "env_timeout"]


def test_no_steps():
    assert asyncio.run(_steps([], [], _Deadline(1, None))) == []


class InlineEnv(Env):
    step_inline = True

    def step(self, text: str):
        self.thread = threading.current_thread()
        return super().step(text)


def test_inline_steps_run_on_the_loop_in_order_with_the_same_failures():
    envs = [InlineEnv("ok"), InlineEnv("raise"), InlineEnv("ok")]

    async def run():
        return threading.current_thread(), await _steps(envs, ["a", "bb", "ccc"], _Deadline(5, None))

    loop_thread, results = asyncio.run(run())
    assert all(env.thread is loop_thread for env in envs)  # no worker thread
    assert [results[0].reward, results[2].reward] == [1.0, 3.0]
    assert isinstance(results[1], EnvFailure) and results[1].reason == "env_error"
    assert str(results[1]) == "InlineEnv.step raised ValueError: bad bb" and isinstance(results[1].__cause__, ValueError)


def test_inline_steps_after_the_deadline_time_out_without_running():
    envs = [InlineEnv("ok"), InlineEnv("ok")]
    results = asyncio.run(_steps(envs, ["a", "b"], _Deadline(-1, None)))
    assert [r.reason for r in results] == ["env_timeout", "env_timeout"]
    assert not any(hasattr(env, "thread") for env in envs)


def test_the_quickstart_environment_steps_inline():
    from flywheel.envs.registry import make_env

    env = make_env("arithmetic")
    assert env.step_inline is True
    env.reset(env.tasks(1, seed=0)[0])
    [result] = asyncio.run(_steps([env], [env.answer], _Deadline(5, None)))
    assert result.reward == 1.0 and result.done


def test_the_deadline_does_not_count_time_with_no_live_engine():
    """A 0.2 s limit whose engine was down for 10 s meanwhile (a crashed engine restarting) has about 10 s
    left, and steps run then; time passes as usual while the engine is up."""
    down = [0.0]
    deadline = _Deadline(0.2, lambda: down[0])
    time.sleep(0.3)
    assert deadline.left() == 0.0
    down[0] = 10.0  # the run had no live replica for 10 s of this group's time
    assert 9.5 < deadline.left() < 10.0
    [result] = asyncio.run(_steps([Env("ok")], ["a"], deadline))
    assert not isinstance(result, EnvFailure)


class TwoTurns:
    """A two-turn environment whose first answer ends the episode with reward 1."""

    system_prompt, tools, stop, max_turns, time_limit_s = None, (), (), 2, 0.3

    def reset(self, task: Task) -> str:
        return task.prompt

    def step(self, text: str):
        return final(1.0)


class SlowEngine:
    """An engine stand-in that answers every call after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def generate(self, prompts, n, temperature, max_tokens, seed, stop=None, schema=None):
        await asyncio.sleep(self.delay)
        return [[Completion([5], [-0.1], "7", (1,))] for _ in prompts]


def test_a_multi_turn_group_whose_generation_outlives_the_time_limit_ends_at_it():
    tokenizer = AutoTokenizer.from_pretrained(TINY)

    async def run(downtime):
        started = time.monotonic()
        episodes = await run_group(SlowEngine(1.0), tokenizer, TwoTurns, Task("1+1=", "2"), 2, 1.0, 4, 0, downtime)
        return episodes, time.monotonic() - started

    episodes, seconds = asyncio.run(run(None))
    assert 0.3 <= seconds < 0.9 and [(e.stop_reason, e.turns, e.reward) for e in episodes] == [("time_limit", 0, 0.0)] * 2

    # the same second of generation spent waiting for a restarted engine (the run's downtime clock ran
    # all along): the limit moves with it, and the turn completes
    t0 = time.monotonic()
    episodes, seconds = asyncio.run(run(lambda: time.monotonic() - t0))
    assert seconds >= 1.0 and [(e.stop_reason, e.turns, e.reward) for e in episodes] == [("done", 1, 1.0)] * 2
