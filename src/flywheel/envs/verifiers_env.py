"""Environments built with the ``verifiers`` package (PrimeIntellect), run unchanged through flywheel's rollout.

    task:
      name: verifiers
      env_args: {load: "my_envs:load_environment", args: {difficulty: 2}}  # returns a vf.Environment

The seam. verifiers drives an episode itself (``env.rollout``: its stop conditions, ``env_response``,
state, timeouts, cleanup) and asks a client for every model turn; flywheel's rollout
(``rollout/group.py``) drives an ``Environment`` through ``reset`` / ``step`` and owns the tokens. The
adapter keeps both loops as written: each episode's ``env.run_rollout`` runs on a background event
loop with a ``TurnClient`` (``envs/verifiers_client.py``) as its model. ``reset`` waits for the
first model request and returns its user message; ``step`` hands the sampled text back and waits for
the next request (its new messages are the environment's turn: tool results or a user message) or
for the end of the rollout, which verifiers scores with the environment's rubric: the episode's
reward, and every rubric function (weighted or a 0-weight metric) as a sub-score, logged unweighted
as ``env/score/<name>``. So the tokens are flywheel's (the model's exactly as sampled; the
environment's rendered by the chat template, loss mask 0: ``envs/episode.py``) and whatever an
environment overrides in verifiers runs as it does there. Mapping ``env_response`` onto ``step``
instead would copy verifiers' turn loop here; a client sampling through the engine by itself would
be a second rollout loop beside ``run_group``.

Supported: ``vf.SingleTurnEnv``, ``vf.MultiTurnEnv`` and ``vf.ToolEnv`` (and their subclasses) whose
prompts are ``[system?, user]`` text messages (the system message the environment's
``system_prompt``), tools called in the Hermes format (``<tool_call>{"name": ..., "arguments": ...}
</tool_call>``, a turn stops after its call), rubrics of per-rollout functions. Train and eval tasks
come from the environment's ``dataset`` and ``eval_dataset`` (without one, the first ``eval_size``
rows of the shuffled dataset are held out). Not supported: few-shot or other multi-message prompts,
images, group-level reward functions (``score_group``), per-row tools (``info["tool_defs"]``),
environments that rewrite earlier messages, verifiers' sampling arguments (the rollout config's
temperature and ``max_new_tokens`` apply), verifiers' server mode. An episode whose verifiers
rollout ends in an error is an ``env_error`` episode (left out of the advantages). ``reset`` runs on
the rollout's event loop (as every environment's does) until verifiers asks for the first turn: a
slow ``setup_state`` (starting a sandbox) holds the loop up meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env
from flywheel.envs.tools import Tool, ToolResult, parse_tool_calls


@register_env("verifiers")
class VerifiersEnv:
    """One episode of the verifiers environment that ``load`` ("module:function", called with ``args``) returns."""

    def __init__(self, load: str, args: dict[str, Any] | None = None, max_turns: int = 10, time_limit_s: float = 300.0) -> None:
        self.env = load_environment(load, json.dumps(args or {}, sort_keys=True))
        own_max_turns = getattr(self.env, "max_turns", -1)
        self.max_turns = own_max_turns if own_max_turns > 0 else max_turns  # verifiers' -1 (no limit): flywheel's
        self.time_limit_s = time_limit_s
        self.system_prompt: str | None = self.env.system_prompt
        functions = getattr(self.env, "tool_map", {})
        self.tools = tuple(
            Tool(d.name, d.description, dict(d.parameters), functions.get(d.name, _run_by_verifiers)) for d in self.env.tool_defs or ()
        )
        self.stop = ("</tool_call>",) if self.tools else ()
        self.output: dict[str, Any] | None = None  # verifiers' RolloutOutput of the finished episode

    def splits(self, train_size: int, eval_size: int, seed: int) -> tuple[list[Task], list[Task]]:
        """Train tasks from the environment's dataset, eval tasks from its eval_dataset, both shuffled with ``seed``."""
        rows = list(self.env.get_dataset(seed=seed))
        if self.env.eval_dataset is None and self.env.eval_dataset_source is None:
            held_out, rows = rows[:eval_size], rows[eval_size:]
        else:
            held_out = list(self.env.get_eval_dataset(n=eval_size, seed=seed))
        return [self._task(row) for row in rows[:train_size]], [self._task(row) for row in held_out]

    def tasks(self, size: int, seed: int) -> list[Task]:
        return self.splits(size, 0, seed)[0]

    def reset(self, task: Task) -> str:
        from flywheel.envs.verifiers_client import TurnClient

        loop = _episode_loop()
        self.client = TurnClient(loop)
        rollout = asyncio.run_coroutine_threadsafe(self.env.run_rollout(task.metadata["verifiers_input"], self.client, "flywheel", {}), loop)
        rollout.add_done_callback(functools.partial(_post_outcome, self.client.events))
        weakref.finalize(self, rollout.cancel)  # an episode flywheel ends first (turn or time limit) stops waiting
        kind, payload = self.client.next_event(self.time_limit_s)
        if kind != "ask":
            self._raise_if_failed(kind, payload)
            raise RuntimeError(f"the verifiers rollout ended before the model's first turn (stop condition {payload.get('stop_condition')!r})")
        self.sent = list(payload)
        return opening(self.sent, self.system_prompt)

    def step(self, model_text: str) -> StepResult:
        self.client.answer(model_text)
        calls = parse_tool_calls(model_text)
        info = {"tool_calls": len(calls), "tool_errors": sum(isinstance(c, ToolResult) for c in calls)}
        kind, payload = self.client.next_event(self.time_limit_s)
        self._raise_if_failed(kind, payload)
        if kind == "done":
            self.output = payload
            return final(float(payload["reward"]), scores={k: float(v) for k, v in (payload.get("metrics") or {}).items()}, **info)
        if payload[: len(self.sent)] != self.sent:
            raise ValueError("the verifiers environment rewrote earlier messages; flywheel's episodes only append turns")
        new, self.sent = payload[len(self.sent) + 1 :], list(payload)  # after the model's own message
        role, contents = environment_turn(new)
        return StepResult(contents, None, False, info, role=role)

    def _raise_if_failed(self, kind: str, payload: Any) -> None:
        if kind == "error":
            raise payload
        if kind == "done" and payload.get("error"):
            self.output = payload
            raise RuntimeError(f"the verifiers rollout failed: {_describe(payload['error'])}")

    def _task(self, row: dict[str, Any]) -> Task:
        return Task(opening(row["prompt"], self.system_prompt), str(row.get("answer") or ""), {"verifiers_input": row})


@functools.cache
def load_environment(load: str, args_json: str) -> Any:
    """The vf.Environment ``load`` returns for these arguments, built once per process and shared by its episodes."""
    module, _, name = load.partition(":")
    if not module or not name:
        raise ValueError(f"task.env_args.load must be 'module:function' (a function returning a verifiers Environment), got {load!r}")
    import verifiers as vf

    env = getattr(importlib.import_module(module), name)(**json.loads(args_json))
    if not isinstance(env, vf.Environment):
        raise TypeError(f"task.env_args.load: {load} returned a {type(env).__name__}, not a verifiers Environment")
    if env.rubric.has_group_rewards:
        raise ValueError(f"task.env_args.load: {load}'s rubric has group-level reward functions, which flywheel's per-episode rewards do not support")
    return env


def opening(messages: Sequence[Any], system_prompt: str | None) -> str:
    """The user message of a ``[system?, user]`` prompt whose system message is ``system_prompt``."""
    roles = [_field(m, "role") for m in messages]
    expected = ["system", "user"] if system_prompt else ["user"]
    if roles != expected or (system_prompt and _field(messages[0], "content") != system_prompt):
        raise ValueError(
            f"a verifiers prompt must be {expected} with the environment's system_prompt, got roles {roles}: "
            "flywheel renders the system prompt and one user message"
        )
    return _text(_field(messages[-1], "content"))


def environment_turn(messages: Sequence[Any]) -> tuple[str, list[str]]:
    """The role (``tool`` or ``user``) and contents of the environment's messages between two model turns."""
    roles = {_field(m, "role") for m in messages} or {"user"}
    if len(roles) != 1 or not roles <= {"tool", "user"}:
        raise ValueError(
            f"the verifiers environment answered with {sorted(roles)} messages; flywheel renders an environment turn as tool or user messages"
        )
    return roles.pop(), [_text(_field(m, "content")) for m in messages]


def _field(message: Any, name: str) -> Any:
    return message[name] if isinstance(message, dict) else getattr(message, name)


def _text(content: Any) -> str:
    if not isinstance(content, str):
        raise ValueError(f"flywheel's verifiers adapter takes text messages, got content of type {type(content).__name__}")
    return content


def _describe(error: Any) -> str:
    return error.get("message") or error.get("error") or str(error) if isinstance(error, dict) else str(error)


def _run_by_verifiers(**arguments: Any) -> Any:
    raise RuntimeError("this tool is run by the verifiers environment's env_response, not by flywheel")


def _post_outcome(events: Any, rollout: Future) -> None:
    """Posts ("done", RolloutOutput) or ("error", exception) when the episode's rollout ends (nothing if cancelled)."""
    if rollout.cancelled():
        return
    error = rollout.exception()
    events.put(("error", error) if error is not None else ("done", rollout.result()))


@functools.cache
def _episode_loop() -> asyncio.AbstractEventLoop:
    """The event loop every verifiers episode of this process runs on, in a daemon thread."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="verifiers-episodes", daemon=True).start()
    return loop
