"""Code that scores and fails: a call that raises or times out makes its episodes invalid (counted, the first
traceback kept); a return of the wrong shape or type is a bug, named in one sentence."""

import asyncio
import math
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from flywheel.algorithms import make_algorithm
from flywheel.config import load_config
from flywheel.monitor.faults import FaultLog
from flywheel.rewards.faults import RewardFault, UserFunctionBug
from flywheel.rewards.graders import make_grader
from flywheel.rewards.guards import LengthPadding
from flywheel.rewards.judge import Judge, JudgeItem, Reply
from flywheel.rewards.pipeline import RewardPipeline, Scorer
from flywheel.rewards.trl_functions import call_trl_function, trl_scorer
from flywheel.rewards.user_functions import load_function
from flywheel.rewards.wiring import task_scores
from flywheel.rollout.group import EnvEpisode
from flywheel.rollout.stream import BatchPlan, Group, NoProgress, RolloutStream, Stall, score_group, take_batch, within_stall_limit
from flywheel.types import Completion, Task

FAULTY = str(Path(__file__).resolve().parents[1] / "faulty_user_code.py")


def task(prompt: str) -> dict:
    return {"prompt": prompt, "answer": "", "columns": {}, "reward": 0.0, "model_turns": [], "completion_ids": []}


def call(fn, completions=("a", "b"), prompt="3+4=", timeout_s=None):
    return asyncio.run(call_trl_function(fn, "f", list(completions), [task(prompt)] * len(completions), timeout_s))


def test_threads_that_load_the_same_file_at_once_all_get_its_function(tmp_path):
    """A rollout worker's groups load a config's grader on their threads at the same time: none may see the module
    half executed (its function not yet defined)."""
    import threading

    slow_module = tmp_path / "slow_grader.py"
    slow_module.write_text("import time\ntime.sleep(0.3)\n\ndef grade(answer, reference, row):\n    return 1.0\n")
    loaded, start = [], threading.Barrier(8)

    def load():
        start.wait()
        try:
            loaded.append(load_function.__wrapped__(f"{slow_module}:grade"))
        except ValueError as error:
            loaded.append(error)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 8 and all(fn is loaded[0] and callable(fn) for fn in loaded), loaded


def test_a_function_that_raises_or_times_out_is_a_reward_fault_with_its_cause():
    with pytest.raises(RewardFault, match=r"^reward function 'f' raised ZeroDivisionError: a reward function bug$") as info:
        call(load_function(f"{FAULTY}:raises_on_some_prompts"), prompt="3+4=")
    assert call(load_function(f"{FAULTY}:raises_on_some_prompts"), prompt="4+4=") == [0.5, 0.5]
    assert info.value.reason == "reward_error" and isinstance(info.value.__cause__, ZeroDivisionError)

    async def slow(completions, **kw):
        await asyncio.sleep(5)

    with pytest.raises(RewardFault, match=r"^reward function 'f' did not return within 0.05 s \(reward.function_timeout_s\)$") as info:
        call(slow, timeout_s=0.05)
    assert info.value.reason == "reward_timeout"


@pytest.mark.parametrize(
    "returned, shown",
    [
        (["1.0", "0.0"], "['1.0', '0.0']"),
        ([1.0], "[1.0]"),
        (1.0, "1.0"),
        ({"a": 1.0, "b": 0.0}, "{'a': 1.0, 'b': 0.0}"),
        ([[1.0], [0.0]], "[[1.0], [0.0]]"),
    ],
)
def test_a_return_of_the_wrong_shape_or_type_is_a_bug_named_in_one_sentence(returned, shown):
    with pytest.raises(UserFunctionBug) as info:
        call(lambda completions, **kw: returned)
    assert str(info.value) == f"reward function 'f' must return a list of 2 floats or None, one per completion; it returned {shown}"


def test_numbers_of_any_numeric_type_are_taken_and_infinity_is_kept_for_the_episode_to_be_invalid():
    import numpy as np
    import torch

    assert call(lambda completions, **kw: [np.float32(0.5), torch.tensor(2.0)]) == [0.5, 2.0]
    assert call(lambda completions, **kw: [math.inf, True]) == [math.inf, 1.0]


def test_the_pipeline_marks_the_failed_calls_completions_and_a_raising_guards_and_goes_on():
    class Fragile(LengthPadding):
        name = "fragile"

        def check(self, completion, task=None):
            if completion == "boom":
                raise KeyError("guard bug")
            return super().check(completion, task)

    raising = trl_scorer(lambda prompts, completions, **kw: [1 / 0] if prompts[0] == "x" else [0.5] * len(completions), "r")
    pipeline = RewardPipeline(None, [Scorer("task", task_scores), raising], [Fragile()])
    result = asyncio.run(pipeline.score(["ok", "boom"], [task("y"), task("y")]))
    assert result.faults[0] is None and result.faults[1].reason == "reward_error"
    assert str(result.faults[1]) == "guard 'fragile' raised KeyError: 'guard bug'"
    assert result.rewards == [0.5, 0.5] and result.metrics["reward/r/mean"] == 0.5
    result = asyncio.run(pipeline.score(["ok", "fine"], [task("x"), task("x")]))
    assert [str(f) for f in result.faults] == ["reward function 'r' raised ZeroDivisionError: division by zero"] * 2
    assert "reward/r/mean" not in result.metrics and result.rewards == [0.0, 0.0]


def test_a_reply_that_breaks_the_verdict_parser_fails_its_episode_only():
    class Replies:  # the backend seam: what an endpoint answered
        supports_schema = False

        async def complete_batch(self, requests, schema):
            return [Reply("[" * 100_000, 0, 0.1), Reply('{"score": 0.75, "reason": "close"}', 0, 0.1)]

    result = asyncio.run(Judge(Replies()).ascore([JudgeItem("q", "a"), JudgeItem("q", "b")]))
    fault, score = result.scores
    assert isinstance(fault, RewardFault) and isinstance(fault.__cause__, RecursionError) and score == 0.75
    assert str(fault) == "the judge's verdict parser raised RecursionError on its reply"


def episode(reward: float = 0.0) -> EnvEpisode:
    completion = Completion([6, 7], [-0.5, -0.5], "67", weight_versions=(0, 0))
    return EnvEpisode(
        [4, 5], completion, reward, turns=1, tool_calls=0, tool_errors=0, stop_reason="done", messages=({"role": "assistant", "content": "67"},)
    )


def test_scored_episodes_carry_the_fault_and_its_first_traceback_is_written_once(tmp_path):
    grpo = make_algorithm(load_config(None).algorithm)
    raising = trl_scorer(lambda prompts, completions, **kw: 1 / 0, "r")
    pipeline = RewardPipeline(None, [Scorer("task", task_scores), raising])
    scored, _, _ = asyncio.run(score_group([episode(1.0), episode(0.0)], Task("1+1=", "2"), grpo, pipeline, 8))
    assert [e.error for e in scored] == ["reward_error", "reward_error"] and not any(e.valid for e in scored)
    log = FaultLog(tmp_path)
    assert [log.record(e, 3) for e in scored] == ["reward_error-ZeroDivisionError", None]
    text = (tmp_path / "reward_error-ZeroDivisionError.txt").read_text()
    assert text.startswith("first seen at step 3: reward function 'r' raised ZeroDivisionError: division by zero") and "Traceback" in text


def test_a_user_grader_that_returns_text_is_a_bug_and_one_that_raises_raises():
    with pytest.raises(
        UserFunctionBug, match=rf"^task.grader '{FAULTY}:grader_returns_text' must return a number \(the reward\); it returned 'correct'$"
    ):
        make_grader(f"{FAULTY}:grader_returns_text", {})("4", "4", {})
    with pytest.raises(RuntimeError, match="the grader is broken"):  # in the environment's step: an env_error episode
        make_grader(f"{FAULTY}:grader_raises", {})("4", "4", {})


def group(position: int, rewards: list[float], error: str | None = None) -> Group:
    return Group(position, [EnvEpisode([1], Completion([5], [-0.1], "", (0,)), r, error=error, turns=1, tool_calls=0, tool_errors=0,
                                       stop_reason="done", messages=()) for r in rewards])  # fmt: skip


class Finished:
    """The consumer's side of a rollout stream: finished groups in order, and the run's stall watch."""

    def __init__(self, groups: list[Group], limit: int) -> None:
        self.groups, self.stall, self.released = list(groups), Stall(limit), 0
        self.tasks, self.workers = SimpleNamespace(long_prompts=0), None
        self.admitted_at: dict[int, float] = {}

    async def next_group(self) -> Group:
        return self.groups.pop(0)

    def release(self, count: int = 1) -> None:
        self.released += count


def test_a_run_that_trains_nothing_for_its_bound_of_groups_stops_with_the_share_and_the_first_error():
    stream = Finished(
        [group(0, [1.0, 0.0]), group(1, [0.0, 0.0], "env_error"), group(2, [0.0, 0.0], "env_error"), group(3, [math.nan, 0.0])], limit=3
    )
    plan = BatchPlan(2, 1, trainer_version=0, max_staleness=0, min_valid=2, keep_group=lambda rewards: True)
    with pytest.raises(NoProgress) as info:
        asyncio.run(take_batch(stream, plan, lambda *args: None))
    # group 0 was trained (the count starts again after it); groups 1-3 were dropped: 5 of their 6 episodes invalid
    assert str(info.value) == (
        "no group was trained in the last 3 admitted groups: 83% of their 6 episodes were invalid (first error: env_error: reward 0.0), "
        "0 groups too stale, 0 uninformative; fix what fails (errors/ in the run directory holds the first tracebacks) or raise rollout.stall_steps"
    )


def test_a_trained_group_starts_the_count_again():
    stream = Finished([group(0, [0.0, 0.0], "env_error"), group(1, [1.0, 0.0]), group(2, [0.0, 0.0], "env_error"), group(3, [1.0, 0.0])], limit=2)
    plan = BatchPlan(2, 1, trainer_version=0, max_staleness=0, min_valid=2, keep_group=lambda rewards: True)
    now = time.monotonic()  # the event loop's clock
    stream.admitted_at = {0: now - 9.0, 1: now - 5.0, 2: now - 3.0, 3: now - 1.0}
    kept, metrics = asyncio.run(take_batch(stream, plan, lambda *args: None))
    assert [g.position for g in kept] == [1, 3] and stream.stall.groups == 0 and metrics["rollout/dropped_invalid_groups"] == 2
    assert 5.0 <= metrics["rollout/group_age_s_max"] < 5.5 and 3.0 <= metrics["rollout/group_age_s_mean"] < 3.5  # trained groups only
    assert stream.admitted_at == {}


def test_no_group_finishing_within_the_stall_timeout_stops_the_run():
    config = load_config(None, ["rollout.stall_timeout_s=0.2"])
    router = SimpleNamespace(downtime_s=lambda: 0.0)
    state = {"accepted": 0, "next_position": 0, "pending": []}
    stream = RolloutStream(router, None, None, config, state, make_algorithm(config.algorithm), None)
    with pytest.raises(NoProgress, match=r"^no group finished in 0.2 s \(0 running\): an engine that never answers"):
        asyncio.run(stream.next_group())


def test_the_stall_limit_does_not_count_time_with_no_live_replica_and_cancels_what_it_gave_up_on():
    async def main():
        down = {"s": 0.0}
        never = asyncio.get_running_loop().create_future()
        start = time.monotonic()

        async def replicas_down_for_a_while():
            await asyncio.sleep(0.1)
            down["s"] = 0.3  # 0.3 s with no live replica: the limit moves out by as much

        helper = asyncio.create_task(replicas_down_for_a_while())
        with pytest.raises(NoProgress, match=r"^stuck after 0.2 s$"):
            await within_stall_limit(never, 0.2, lambda: down["s"], lambda: "stuck after 0.2 s")
        await helper
        return time.monotonic() - start, never.cancelled()

    waited, cancelled = asyncio.run(main())
    assert 0.5 <= waited < 1.5 and cancelled
    assert asyncio.run(within_stall_limit(asyncio.sleep(0.01, result="done"), 1.0, lambda: 0.0, lambda: "")) == "done"


class Unanswering:
    """An engine whose process is stopped: it stays alive, no request or load ever returns."""

    async def generate(self, *args, **kwargs):
        await asyncio.get_running_loop().create_future()

    async def load_weights(self, update):
        await asyncio.get_running_loop().create_future()

    def shutdown(self) -> None:
        pass


def test_engines_that_never_load_a_version_stop_the_run_and_the_load_is_abandoned():
    from flywheel.controller import load_everywhere
    from flywheel.rollout.router import EngineRouter
    from flywheel.weights.base import WeightUpdate

    @dataclass(frozen=True)
    class Version(WeightUpdate):
        def receive(self):
            return iter(())

    config = load_config(None, ["rollout.stall_timeout_s=0.2"])
    router = EngineRouter([Unanswering(), Unanswering()])
    state = {"accepted": 0, "next_position": 0, "pending": []}
    stream = RolloutStream(router, None, None, config, state, make_algorithm(config.algorithm), None)
    with pytest.raises(NoProgress, match=r"^the engines did not load weights version 3 in 0.2 s: an engine that never answers"):
        asyncio.run(load_everywhere(router, stream, Version(3)))
    assert stream.version == 0 and router._loads is None  # the gate did not widen; no load is left in flight


def test_a_held_out_eval_on_an_engine_that_never_answers_stops_the_run():
    from chat_tokenizer import chat_tokenizer

    from flywheel.eval.heldout import evaluate
    from flywheel.rollout.stream import load_tasks

    config = load_config(None, ["rollout.stall_timeout_s=0.2", "task.eval_size=3"])
    with pytest.raises(NoProgress, match=r"^no held-out episode finished in 0.2 s \(3 running\): an engine that never answers"):
        asyncio.run(evaluate(Unanswering(), chat_tokenizer(), load_tasks(config), 1.0, config))


def test_the_invalid_episode_alert_counts_reward_faults_too():
    from flywheel.controller import watch_invalid

    row = {"rollout/invalid_frac": 0.5, "env/errors": 1, "env/timeouts": 0, "reward/nonfinite": 2, "reward/errors": 8, "reward/timeouts": 5}
    [alert] = watch_invalid(3, row, load_config(None))
    assert alert.message == (
        "50% of this step's episodes were invalid (environment errors 1, timeouts 0, non-finite rewards 2, reward errors 8, reward timeouts 5), "
        "above rollout.invalid_alert_rate 20%; first tracebacks in errors/."
    )
