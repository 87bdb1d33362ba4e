"""The model as a ``verifiers`` environment sees it: a ``vf.Client`` whose answers are the turns flywheel's rollout sampled.

verifiers runs an episode as ``env.rollout(input, client, ...)``: every model turn is one
``client.get_response(prompt_messages, ...)``. ``TurnClient`` hands each of those prompts to the flywheel
side (``next_event``) and waits until the rollout has sampled the turn and passes its text back
(``answer``); the text becomes a ``vf.Response`` whose tool calls are the ``<tool_call>`` blocks of
the text (the Hermes / Qwen format that ``flywheel.envs.tools`` parses), as a vLLM server's tool
parser would give them. The episode's coroutine runs on another thread's event loop than the
caller of ``answer`` and ``next_event``: they meet through a thread-safe queue and a future.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import time
from typing import Any, Literal

import verifiers as vf
from verifiers.clients import Client

from flywheel.envs.tools import ToolCall, parse_tool_calls

_CALL_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|\Z)", re.S)  # as flywheel.envs.tools parses them
Event = tuple[Literal["ask", "done", "error"], Any]  # prompt messages, the RolloutOutput, or the exception


class TurnClient(Client):
    """One episode's model: ``get_response`` posts ("ask", prompt messages) and returns the text given to ``answer``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(None)
        self.loop = loop
        self.events: queue.Queue[Event] = queue.Queue()
        self.turns = 0
        self._reply: asyncio.Future[str] | None = None

    def next_event(self, timeout_s: float) -> Event:
        """The episode's next event; TimeoutError when it has none within ``timeout_s``."""
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"the verifiers environment did not answer within {timeout_s:g} s") from None

    def answer(self, text: str) -> None:
        """Passes the sampled text of the model turn the episode waits for."""
        reply = self._reply
        if reply is None:
            raise RuntimeError("the verifiers environment is not waiting for a model turn")
        self._reply = None
        self.loop.call_soon_threadsafe(lambda: reply.done() or reply.set_result(text))

    # vf.Client: prompts and tools pass through as they are; the "native" response is the sampled text.
    def setup_client(self, config: vf.ClientConfig) -> None:
        raise TypeError("a TurnClient is made by flywheel's verifiers adapter, not from a ClientConfig")

    async def to_native_tool(self, tool: vf.Tool) -> vf.Tool:
        return tool

    async def to_native_prompt(self, messages: vf.Messages) -> tuple[vf.Messages, dict]:
        return list(messages), {}

    async def get_native_response(
        self, prompt: vf.Messages, model: str, sampling_args: vf.SamplingArgs, tools: list[vf.Tool] | None = None, **kwargs: Any
    ) -> str:
        self._reply = asyncio.get_running_loop().create_future()
        self.events.put(("ask", prompt))
        return await self._reply

    async def raise_from_native_response(self, response: str) -> None:
        return None

    async def from_native_response(self, response: str) -> vf.Response:
        self.turns += 1
        return response_from_text(response, f"turn{self.turns}")

    async def close(self) -> None:
        return None


def response_from_text(text: str, turn_id: str) -> vf.Response:
    """The assistant message of a sampled text: its well-formed ``<tool_call>`` blocks as tool calls
    (ids ``<turn_id>_<k>``), the rest of the text as its content."""
    calls = [c for c in parse_tool_calls(text) if isinstance(c, ToolCall)]
    tool_calls = [vf.ToolCall(id=f"{turn_id}_{k}", name=c.name, arguments=json.dumps(c.arguments)) for k, c in enumerate(calls)]
    content = _CALL_BLOCK.sub("", text).strip() if tool_calls else text
    message = vf.ResponseMessage(
        content=content, tool_calls=tool_calls or None, finish_reason="tool_calls" if tool_calls else "stop", is_truncated=False
    )
    return vf.Response(id=turn_id, created=int(time.time()), model="flywheel", message=message)
