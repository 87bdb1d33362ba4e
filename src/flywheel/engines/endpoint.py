"""OpenAI-compatible servers (vLLM's, a hosted API) through ``openai.AsyncOpenAI``: ``OpenAIEndpoint``, the client
with its limits and retries (the LLM judge's backend builds on it, rewards/judge.py), and ``EndpointScorer``, a
model behind such a server as the scoring half of an ``Engine`` (a distillation teacher served outside the run;
the server must return prompt logprobs, as vLLM's does with ``prompt_logprobs``).

The API key is read from the environment variable named ``api_key_env`` (None: no key) and never logged.
At most ``concurrency`` requests are in flight, each with ``timeout_s``; connection errors, timeouts, 408/409/429
and 5xx are retried ``max_retries`` times after ``backoff_s * 2**i`` seconds; then the endpoint's ``unreachable``
error, and at once its ``refused`` error for any other HTTP status.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class EndpointUnavailable(RuntimeError):
    """The endpoint refused a request, or did not answer after the retries: one sentence naming what to fix.
    ``attempts``: how many requests were made."""

    def __init__(self, message: str, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


class OpenAIEndpoint:
    """A client of ``base_url`` serving ``model``, bound to the running event loop (asyncio objects cannot cross
    loops); ``request`` runs one call with the limits and retries of the module docstring. ``role`` names the
    endpoint in error sentences."""

    role = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        if api_key_env is not None and not os.environ.get(api_key_env):
            raise ValueError(f"the {self.role}'s API key variable {api_key_env} is not set in the environment")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url, self.model, self.api_key_env = base_url, model, api_key_env
        self.concurrency, self.timeout_s, self.max_retries, self.backoff_s = concurrency, timeout_s, max_retries, backoff_s
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    def _bind(self) -> tuple[Any, asyncio.Semaphore]:
        if self._loop is not asyncio.get_running_loop():
            import openai

            key = os.environ[self.api_key_env] if self.api_key_env else "none"  # read here, kept only by the client
            self._loop = asyncio.get_running_loop()
            self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=0)
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._client, self._semaphore

    async def request(self, call: Callable[[Any], Awaitable[T]]) -> tuple[T, int]:
        """``call(client)``'s result and how many retries it took."""
        import openai

        client, semaphore = self._bind()
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                async with semaphore:
                    return await call(client), attempt
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                last = exc
            except openai.APIStatusError as exc:
                if exc.status_code not in (408, 409):
                    raise self.refused(exc, attempt + 1) from None
                last = exc
        raise self.unreachable(last, self.max_retries + 1) from None

    def refused(self, error, attempts: int) -> Exception:
        return EndpointUnavailable(
            f"the {self.role} {self.base_url} refused the request with HTTP {error.status_code} ({error.message}); "
            "fix what it names (model name, API key, request size)",
            attempts,
        )

    def unreachable(self, error: Exception, attempts: int) -> Exception:
        return EndpointUnavailable(
            f"the {self.role} {self.base_url} did not answer after {attempts} attempts ({type(error).__name__}: {error}); "
            "check that the server is running and reachable at that address",
            attempts,
        )


class EndpointScorer(OpenAIEndpoint):
    """``score(sequences)`` as ``Engine.score``: per sequence, log p(token t | tokens before it) for t >= 1,
    from one completions request each (the token ids as the prompt, one generated token, prompt logprobs)."""

    role = "teacher endpoint"

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        return list(await asyncio.gather(*(self._one(tokens) for tokens in sequences)))

    async def _one(self, tokens: list[int]) -> list[float]:
        response, _ = await self.request(
            lambda client: client.completions.create(
                model=self.model, prompt=tokens, max_tokens=1, temperature=0.0, extra_body={"prompt_logprobs": 0}
            )
        )
        return prompt_logprobs_of(tokens, (response.choices[0].model_extra or {}).get("prompt_logprobs"), self.base_url)


def prompt_logprobs_of(tokens: list[int], entries: list | None, base_url: str) -> list[float]:
    """vLLM's ``prompt_logprobs`` of a prompt (None for the first token, then a mapping of token id to its
    logprob for every later position, the prompt's own token among them) -> the prompt tokens' logprobs."""
    if not isinstance(entries, list) or len(entries) != len(tokens):
        raise EndpointUnavailable(
            f"the teacher endpoint {base_url} returned no prompt logprobs for a sequence of {len(tokens)} tokens; "
            "serve the teacher with a server that accepts prompt_logprobs (vLLM's OpenAI server)"
        )
    return [float(entry[str(token)]["logprob"]) for entry, token in zip(entries[1:], tokens[1:])]
