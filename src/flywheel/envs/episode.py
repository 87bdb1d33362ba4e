"""Token-in/token-out episodes: one token sequence, built by appending, never re-tokenizing model text.

    prompt ids       the chat template applied once to [system?, user] (with the tools), generation prompt included
    model turn       the ids the engine sampled, as sampled                     loss mask 1, engine logprobs
    environment turn the template's text between the model's last sampled       loss mask 0, logprob 0.0
                     token and the next generation prompt, tokenized alone

The environment turn's text is read from a rendering of the conversation in which the model's
last message is a marker: everything after the marker (the template's end of the assistant message,
minus the special token the model already sampled, then the new messages and the next generation
prompt). So the model's tokens are exactly what it sampled (re-tokenizing its text can give other
ids), and when they are the canonical tokens of its text, the whole sequence equals the template's
rendering of the conversation (tests/unit/test_episode.py). A tokenizer without a chat template
(raw completion models such as the quickstart's) gets the plain text of each message instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flywheel.envs.tools import Tool
from flywheel.types import Completion

Message = dict[str, str]
_MARK = "<<flywheel:end-of-model-text>>"


class Renderer:
    """Messages to ids for one tokenizer, system prompt and tool list."""

    def __init__(self, tokenizer: Any, system_prompt: str | None = None, tools: Sequence[Tool] = ()) -> None:
        self.tokenizer = tokenizer
        self.system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.tools = [t.schema() for t in tools] or None
        self.chat = tokenizer.chat_template is not None
        self.special_ids = set(tokenizer.all_special_ids)

    def prompt(self, user: str | list[Message]) -> tuple[list[int], list[Message]]:
        """Ids of the first user message (or of a whole prompt of chat messages) with the generation
        prompt, and the conversation so far. The system prompt comes first unless the messages start
        with their own; without a chat template, the messages' contents are joined by newlines."""
        given = [{"role": "user", "content": user}] if isinstance(user, str) else [dict(m) for m in user]
        messages = (self.system if given[0]["role"] != "system" else []) + given
        if not self.chat:
            return self.tokenizer.encode(user if isinstance(user, str) else "\n".join(m["content"] for m in given)), messages
        return self._encode(self._render(messages)), messages

    def env_turn(self, conversation: list[Message], model_ids: Sequence[int], env_messages: list[Message]) -> list[int]:
        """Ids that follow the model's sampled ids: the end of its message, env_messages, the next generation prompt.

        ``conversation`` ends with the model's message.
        """
        if not self.chat:
            return self._encode("".join(m["content"] for m in env_messages))
        rendered = self._render(conversation[:-1] + [{"role": "assistant", "content": _MARK}] + env_messages)
        tail = rendered[rendered.rindex(_MARK) + len(_MARK) :]
        if model_ids and model_ids[-1] in self.special_ids:  # e.g. <|im_end|>: sampled, so not repeated
            closing = self.tokenizer.decode([model_ids[-1]])
            if not tail.startswith(closing):
                raise ValueError(f"the chat template does not close an assistant message with {closing!r}, the token the model stopped on")
            tail = tail[len(closing) :]
        return self._encode(tail)

    def _render(self, messages: list[Message]) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=self.tools, add_generation_prompt=True, tokenize=False)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)


@dataclass
class Transcript:
    """One episode as it grows: the prompt, then every token after it with its loss mask, logprob and weight version."""

    prompt_ids: list[int]
    messages: list[Message]
    ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int | None] = field(default_factory=list)  # weight version of each model token, None on env tokens

    @property
    def context(self) -> list[int]:
        """What the model reads next."""
        return self.prompt_ids + self.ids

    def add_model_turn(self, completion: Completion) -> None:
        n = len(completion.token_ids)
        self.ids += completion.token_ids
        self.loss_mask += [1] * n
        self.logprobs += completion.logprobs
        self.versions += completion.weight_versions
        self.messages.append({"role": "assistant", "content": completion.text})

    def add_env_turn(self, ids: list[int], messages: list[Message]) -> None:
        self.ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [None] * len(ids)
        self.messages += messages

    def completion(self, text: str, truncated: bool) -> Completion:
        """Everything after the prompt as one Completion (versions None on environment tokens)."""
        return Completion(list(self.ids), list(self.logprobs), text, tuple(self.versions), truncated, tuple(self.loss_mask))


def env_messages(observation: str | list[str], role: str) -> list[Message]:
    """The environment's turn as messages: one per tool result, else one."""
    contents = [observation] if isinstance(observation, str) else observation
    return [{"role": role, "content": c} for c in contents]
