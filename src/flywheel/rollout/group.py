"""Multi-turn rollout: n concurrent episodes of one task against an engine, turn by turn.

Each turn, the group's live episodes are generated in one engine call (their contexts as token
ids), then every environment answers its model turn in a worker thread, concurrently (on the event
loop, one after the other, for environments with ``step_inline``: a pure, quick step). Groups are
coroutines, so many run at once (``asyncio.gather(*(run_group(...) for task in tasks))``): the
engine batches each call, and environments that wait (sandbox, verifier) do not block the loop.

An episode ends when its environment says done (its reward), when a model turn hits the token
limit without finishing, after ``max_turns`` model turns, at the time limit (``time_limit_s``
from the group's start, generation included; time with no live engine replica is not counted), or
when its next turn could overflow the model's
context (``tokenizer.model_max_length``); all but the first score 0. An environment that raises (in
``reset`` or ``step``) or whose ``step`` outlives the time limit gives an episode with ``error`` set
("env_error", "env_timeout"): it is left out of the advantages, never scored 0, and the group goes on.

One-turn environments (``max_turns == 1``) take a fast path: one engine request samples the n
completions of the group (seed ``seed``), then every environment grades its completion.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from flywheel.engines.base import Engine
from flywheel.envs.base import Environment, StepResult, Task
from flywheel.envs.episode import Renderer, Transcript, env_messages
from flywheel.types import Completion, Episode

StopReason = Literal["done", "truncated", "max_turns", "time_limit", "context_limit", "env_error", "env_timeout"]


class EnvFailure(Exception):
    """An environment raised or outlived the time limit; ``reason`` says which, ``__cause__`` holds the error."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class EnvEpisode(Episode):
    """An Episode (prompt ids, multi-turn completion with its loss mask, reward) and how it went."""

    turns: int  # model turns
    tool_calls: int
    tool_errors: int
    stop_reason: StopReason
    messages: tuple[dict[str, str], ...]  # the conversation as text, for logs and rollout dumps
    turn_lengths: tuple[int, ...] = ()  # model tokens of each model turn
    scores: dict[str, float] = field(default_factory=dict, compare=False)  # sub-scores of the last step's info["scores"]
    failure: BaseException | None = field(default=None, compare=False, repr=False)  # what an ``error`` episode raised

    @property
    def model_turns(self) -> list[str]:
        """The model's own text, turn by turn (never the environment's)."""
        return [m["content"] for m in self.messages if m["role"] == "assistant"]


@dataclass
class _Live:
    env: Environment
    transcript: Transcript
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    turn_lengths: list[int] = field(default_factory=list)


async def run_group(
    engine: Engine,
    tokenizer: Any,
    env_factory: Callable[[], Environment],
    task: Task,
    n: int,
    temperature: float,
    max_tokens: int,
    seed: int,
    downtime: Callable[[], float] | None = None,
) -> list[EnvEpisode]:
    """n episodes of ``task``, each with its own environment from ``env_factory``, in the order started.

    The group follows its first environment's ``max_turns``, ``time_limit_s``, ``tools``, ``stop``
    and ``system_prompt``. An episode that ends before its first turn (time or context limit) has an
    empty completion (``turns == 0``, weight version -1): nothing to train on.

    ``engine`` samples the model turns (in a run, the router pinned to the group, so that every turn
    meets its prefix cache); ``max_tokens`` limits each model turn. Turn t of the group's i-th live
    episode is sampled with seed ``seed + t * n + i``. ``downtime``: the run's clock of seconds with no
    live engine replica (``EngineRouter.downtime_s``), which the time limit does not count.
    """
    envs = [env_factory() for _ in range(n)]
    first = envs[0]
    renderer = Renderer(tokenizer, first.system_prompt, first.tools)
    deadline = _Deadline(first.time_limit_s, downtime)
    live: list[_Live] = []
    finished: dict[int, EnvEpisode] = {}
    prompt = _PromptCache(renderer)
    for i, env in enumerate(envs):
        try:
            live.append(_Live(env, prompt.transcript(env.reset(task))))
        except Exception as error:  # noqa: BLE001 - any environment fault fails its episode only
            live.append(_Live(env, prompt.transcript(task.prompt)))  # a real row, never trained on
            finished[i] = _finish(
                renderer,
                live[i],
                0.0,
                "env_error",
                _failure("env_error", f"{type(env).__name__}.reset raised {type(error).__name__}: {error}", error),
            )
    if first.max_turns == 1 and not finished:
        return await _one_turn(engine, renderer, live, temperature, max_tokens, seed, first.stop, deadline)
    for turn in range(first.max_turns):
        for i in range(n):
            if i not in finished and len(live[i].transcript.context) + max_tokens > tokenizer.model_max_length:
                finished[i] = _finish(renderer, live[i], 0.0, "context_limit")
        pending = [i for i in range(n) if i not in finished]
        if not pending:
            break
        contexts = [live[i].transcript.context for i in pending]
        call = asyncio.ensure_future(engine.generate(contexts, 1, temperature, max_tokens, seed + turn * n, list(first.stop) or None))
        try:
            while not call.done() and (left := deadline.left()) > 0:  # an engine outage meanwhile moves the deadline
                await asyncio.wait({call}, timeout=left)
        finally:
            if not call.done():  # the time limit, or the group cancelled
                call.cancel()
        if not call.done():  # cancelled just now (done once the cancellation lands): the time limit
            break
        outputs = call.result()
        results = await _steps([live[i].env for i in pending], [out[0].text for out in outputs], deadline)
        for i, out, result in zip(pending, outputs, results):
            episode, completion = live[i], out[0]
            episode.transcript.add_model_turn(completion)
            episode.turns += 1
            episode.turn_lengths.append(len(completion.token_ids))
            if isinstance(result, EnvFailure):
                finished[i] = _finish(renderer, episode, 0.0, result.reason, result)
                continue
            episode.tool_calls += result.info.get("tool_calls", 0)
            episode.tool_errors += result.info.get("tool_errors", 0)
            if result.done:
                reward = 0.0 if result.reward is None else result.reward
                finished[i] = replace(_finish(renderer, episode, reward, "done"), scores=result.info.get("scores", {}))
            elif completion.truncated:
                finished[i] = _finish(renderer, episode, 0.0, "truncated")
            elif turn + 1 == first.max_turns:
                finished[i] = _finish(renderer, episode, 0.0, "max_turns")
            else:
                messages = env_messages(result.observation or "", result.role)
                episode.transcript.add_env_turn(renderer.env_turn(episode.transcript.messages, episode.transcript.ids, messages), messages)
    for i in range(n):
        if i not in finished:  # the time limit passed before (or while) its next turn was generated
            finished[i] = _finish(renderer, live[i], 0.0, "time_limit")
    return [finished[i] for i in range(n)]


async def _one_turn(
    engine: Engine, renderer: Renderer, live: list[_Live], temperature: float, max_tokens: int, seed: int, stop: Sequence[str], deadline: _Deadline
) -> list[EnvEpisode]:
    """The group of a one-turn environment: its n completions from one request, graded concurrently."""
    [completions] = await engine.generate([live[0].transcript.context], len(live), temperature, max_tokens, seed, list(stop) or None)
    results = await _steps([episode.env for episode in live], [c.text for c in completions], deadline)
    episodes = []
    for episode, completion, result in zip(live, completions, results):
        t = episode.transcript
        messages = (*t.messages, {"role": "assistant", "content": completion.text})
        common = dict(turns=1, tool_calls=0, tool_errors=0, messages=messages, turn_lengths=(len(completion.token_ids),))
        if isinstance(result, EnvFailure):
            episodes.append(EnvEpisode(t.prompt_ids, completion, 0.0, error=result.reason, stop_reason=result.reason, failure=result, **common))
            continue
        reward = 0.0 if result.reward is None else result.reward
        reason = "done" if result.done else "truncated" if completion.truncated else "max_turns"
        common |= dict(
            tool_calls=result.info.get("tool_calls", 0), tool_errors=result.info.get("tool_errors", 0), scores=result.info.get("scores", {})
        )
        episodes.append(EnvEpisode(t.prompt_ids, completion, reward if result.done else 0.0, stop_reason=reason, **common))
    return episodes


class _Deadline:
    """``limit`` seconds from now, not counting the seconds the engine had no live replica (the
    restart of a crashed engine: the group's requests were waiting for it, not running).
    ``downtime``: the engine's clock of those seconds (``EngineRouter.downtime_s``), if it has one."""

    def __init__(self, limit: float, downtime: Callable[[], float] | None) -> None:
        self.downtime = downtime or (lambda: 0.0)
        self.end = time.monotonic() + limit - self.downtime()

    def left(self) -> float:
        return max(0.0, self.end + self.downtime() - time.monotonic())


class _PromptCache:
    """Transcripts of first user messages; the ids of each distinct message are rendered once (a
    group's environments usually open with the same one)."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer, self.rendered = renderer, {}

    def transcript(self, user: str | list[dict[str, str]]) -> Transcript:
        key = user if isinstance(user, str) else json.dumps(user)
        if key not in self.rendered:
            self.rendered[key] = self.renderer.prompt(user)
        ids, messages = self.rendered[key]
        return Transcript(list(ids), [dict(m) for m in messages])


async def _steps(envs: Sequence[Environment], texts: Sequence[str], deadline: _Deadline) -> list[StepResult | EnvFailure]:
    """Each environment's answer to its text, every ``step`` in a worker thread, concurrently, awaited
    together (one wait per turn, not a task per episode); a failure where it raised or the
    episode's time ran out first. Environments whose class says ``step_inline = True`` (a pure,
    quick step) answer on the event loop instead, one after the other: no thread hop per episode."""
    if envs and getattr(envs[0], "step_inline", False):
        if deadline.left() <= 0:  # as in a worker thread: no time left, every step has timed out
            return [
                _failure("env_timeout", f"{type(env).__name__}.step did not answer within the episode's time limit", TimeoutError()) for env in envs
            ]
        return [_inline_outcome(env, text) for env, text in zip(envs, texts)]
    loop = asyncio.get_running_loop()
    futures = [loop.run_in_executor(None, contextvars.copy_context().run, env.step, text) for env, text in zip(envs, texts)]
    try:
        if futures and (left := deadline.left()) > 0:  # none left: every step has timed out, as wait_for(..., 0) says
            await asyncio.wait(futures, timeout=left)
    except asyncio.CancelledError:  # the group is cancelled: so are its steps (those not yet running never run)
        for future in futures:
            future.cancel()
        raise
    return [_outcome(env, future) for env, future in zip(envs, futures)]


def _outcome(env: Environment, future: asyncio.Future) -> StepResult | EnvFailure:
    if not future.done():  # still running (or queued: then it never runs)
        future.cancel()
        return _failure("env_timeout", f"{type(env).__name__}.step did not answer within the episode's time limit", TimeoutError())
    error = future.exception()
    if error is None:
        return future.result()
    if isinstance(error, TimeoutError):  # as a timeout of the wait itself
        return _failure("env_timeout", f"{type(env).__name__}.step did not answer within the episode's time limit", error)
    if not isinstance(error, Exception):
        raise error
    return _failure("env_error", f"{type(env).__name__}.step raised {type(error).__name__}: {error}", error)


def _inline_outcome(env: Environment, text: str) -> StepResult | EnvFailure:
    """``env.step(text)`` on the calling thread (in a copy of its context, as a worker thread runs
    it), its exception as the failure a worker thread's would give."""
    try:
        return contextvars.copy_context().run(env.step, text)
    except TimeoutError as error:
        return _failure("env_timeout", f"{type(env).__name__}.step did not answer within the episode's time limit", error)
    except Exception as error:  # noqa: BLE001 - any environment fault fails its episode only
        return _failure("env_error", f"{type(env).__name__}.step raised {type(error).__name__}: {error}", error)


def _failure(reason: StopReason, detail: str, cause: BaseException) -> EnvFailure:
    failure = EnvFailure(reason, detail)
    failure.__cause__ = cause
    return failure


def _finish(renderer: Renderer, episode: _Live, reward: float, reason: StopReason, failure: BaseException | None = None) -> EnvEpisode:
    t = episode.transcript
    error = reason if failure is not None else None
    if not t.ids:  # ended before its first turn: no completion to train on
        empty = Completion([], [], "", weight_versions=(), loss_mask=())
        return EnvEpisode(
            t.prompt_ids,
            empty,
            0.0,
            error=error,
            turns=0,
            tool_calls=0,
            tool_errors=0,
            stop_reason=reason,
            messages=tuple(t.messages),
            failure=failure,
        )
    text = renderer.tokenizer.decode(t.ids, skip_special_tokens=True)
    return EnvEpisode(
        t.prompt_ids,
        t.completion(text, truncated=reason == "truncated"),
        reward,
        error=error,
        turns=episode.turns,
        tool_calls=episode.tool_calls,
        tool_errors=episode.tool_errors,
        stop_reason=reason,
        messages=tuple(t.messages),
        turn_lengths=tuple(episode.turn_lengths),
        failure=failure,
    )


def episode_metrics(episodes: Sequence[EnvEpisode], tools: bool = True) -> dict[str, float]:
    """env/turns_mean, env/time_limit_frac, env/score/<name> (the mean of each sub-score over the
    episodes that have it) and, when the environment has ``tools``, tools/call_rate (episodes with a
    call), tools/calls_per_episode, tools/error_rate (of all calls)."""
    scores: dict[str, list[float]] = {}
    for e in episodes:
        for name, value in e.scores.items():
            scores.setdefault(f"env/score/{name}", []).append(value)
    calls = sum(e.tool_calls for e in episodes)
    tool_metrics = {
        "tools/call_rate": sum(e.tool_calls > 0 for e in episodes) / len(episodes),
        "tools/calls_per_episode": calls / len(episodes),
        "tools/error_rate": sum(e.tool_errors for e in episodes) / calls if calls else 0.0,
    }
    score_means = {name: sum(values) / len(values) for name, values in sorted(scores.items())}
    turns = {
        "env/turns_mean": sum(e.turns for e in episodes) / len(episodes),
        "env/time_limit_frac": sum(e.stop_reason == "time_limit" for e in episodes) / len(episodes),
    }
    return (tool_metrics if tools else {}) | turns | score_means
