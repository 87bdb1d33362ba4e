"""The Environment protocol: one multi-turn episode at a time, driven by the rollout.

    env = make_env("calculator")            # a fresh instance per episode (it holds the episode's state)
    first = env.reset(task)                 # the first user message
    result = env.step(model_text)           # after every model turn, until result.done

An episode ends when ``step`` says ``done`` (with the reward), after ``max_turns`` model turns, or
when ``time_limit_s`` has passed since it started; the last two score 0. Observations are the
environment's next turn: a tool result (``role="tool"``, one message per tool call) or feedback
(``role="user"``). Text only: the rollout (``flywheel.envs.episode``) turns messages into tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from flywheel.envs.tools import Tool
from flywheel.types import Task

__all__ = ["Environment", "StepResult", "Task", "final"]


@dataclass(frozen=True)
class StepResult:
    """What the environment answers to one model turn.

    ``observation`` is the next turn's content (a list: one message per tool call), None when done;
    ``reward`` is set when ``done``; ``info`` carries counters (``tool_calls``, ``tool_errors``).
    """

    observation: str | list[str] | None
    reward: float | None
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    role: Literal["user", "tool"] = "user"


def final(reward: float, **info: Any) -> StepResult:
    """The last step of an episode."""
    return StepResult(observation=None, reward=reward, done=True, info=info)


@runtime_checkable
class Environment(Protocol):
    max_turns: int  # model turns per episode
    time_limit_s: float  # wall-clock budget of one episode, generation included
    system_prompt: str | None  # rendered before the first user message (chat templates only)
    tools: Sequence[Tool]  # declared to the model through the chat template; may be empty
    stop: Sequence[str]  # extra stop strings for a model turn (kept in its output), e.g. "</tool_call>"
    # Optional class attributes: ``guards`` (reward-hacking guard names that fit the environment, on
    # by default unless reward.guards is set) and ``splits(train_size, eval_size, seed)`` (its own
    # train and held-out tasks; without it, eval tasks come from tasks(eval_size, seed + 1)), and
    # ``step_inline = True`` for a pure, quick ``step`` (no I/O, no waiting): the rollout then calls it
    # on its event loop instead of a worker thread, and never times it out.

    def tasks(self, size: int, seed: int) -> list[Task]:
        """``size`` tasks of this environment, the same for the same seed."""
        ...

    def reset(self, task: Task) -> str | list[dict[str, str]]:
        """Starts an episode of ``task``; returns the first user message (or the whole prompt as
        ``{role, content}`` chat messages)."""
        ...

    def step(self, model_text: str) -> StepResult:
        """The environment's answer to the model's turn (its text, special tokens skipped)."""
        ...
