"""The engine seam: everything the router, ``run_group``, the judge and the controller need from an
inference engine. Callers hold ``Engine`` objects (in a run, ``engines.remote.RemoteEngine`` over a
Ray actor running an implementation such as ``engines.vllm.VLLMEngine``), never raw actor handles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from flywheel.types import Completion
from flywheel.weights.base import WeightUpdate


class EngineDied(RuntimeError):
    """The engine's process is gone: its requests in flight are lost (the caller may resubmit them)."""


@dataclass(frozen=True)
class Loaded:
    """What a weight load reports."""

    pause_s: float  # seconds generation was paused (the longest, over several replicas)
    probe_gap: float | None = None  # the version's probe: the largest |engine - trainer| logprob; None without one


class Engine(Protocol):
    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
    ) -> list[list[Completion]]:
        """``n`` sampled completions of each prompt (token ids, no padding): ``[len(prompts)][n]``.

        Prompt i samples with seed ``seed + i``: the same call on the same weights returns the same
        tokens. Each completion has at most ``max_tokens`` tokens and ends at end-of-sequence, at the
        limit (``truncated``), or after one of the ``stop`` strings, which its text keeps. With ``schema`` (a
        JSON schema), sampling is constrained so that a completion that ends at end-of-sequence is one compact
        JSON document matching it (a completion cut at the limit is a prefix of one). Per token it
        carries the engine's logprob under the weights that sampled it and that weights' version
        (``Completion.weight_versions``, non-decreasing along the completion; 0 before any
        ``load_weights``). Raises ``EngineDied`` if the engine's process dies meanwhile.
        """
        ...

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        """The engine's logprob of every token of each sequence given the tokens before it (``len(sequence) - 1``
        values, from the second token on), from a prefill under the weights it serves: a teacher scoring a
        student's tokens. Raises ``EngineDied`` if the engine's process dies meanwhile."""
        ...

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        """Replaces every weight of the model with the tensors of ``update`` in place, without dropping
        or restarting requests in flight, and returns the seconds generation was paused (and, with
        ``update.probe``, the probe's gap). A tensor that is not what the trainer published, or a probe
        gap over its tolerance, raises ``WeightsCorrupt``: no token sampled from that load is returned.

        Guarantees, once it returns: every token sampled from then on comes from the new weights and
        carries ``update.version``; no token is labelled with a version newer than the weights that
        produced it (a token in transit during the swap may carry the older one); cached prefixes of
        the old weights are not reused. Raises ``EngineDied`` if the engine's process dies meanwhile.
        """
        ...

    def shutdown(self) -> None:
        """Stops the engine and its processes; does nothing if they are gone already."""
        ...
