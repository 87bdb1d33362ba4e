"""The weight seam: how the trainer's weights reach the engines' workers.

Trainer side, a ``WeightTransport`` publishes a state dict as version v and returns a
``WeightUpdate``: a small picklable handle that travels to every engine (through Ray, then vLLM's
RPC) in place of the tensors. Engine side, each worker process joins the update's ``group`` once
(``join``, where the transport has one) and calls ``update.receive(link)`` inside vLLM's weight-update
session, feeding the (name, tensor) pairs to its model's weight loader. A transport is a new file
here: a ``WeightUpdate`` subclass (its ``receive``) and a ``WeightTransport`` (its ``publish``), plus
a member of ``config.weights.TransportConfig``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import xxhash

from flywheel.weights.probe import Probe


def digest(tensor: torch.Tensor) -> int:
    """The 64-bit XXH3 hash of a contiguous CPU tensor's bytes (17 GB/s on one core here, 7x zlib's
    CRC-32): equal on the trainer and on an engine worker when the bytes are, and all but surely not otherwise."""
    return xxhash.xxh3_64_intdigest(tensor.detach().reshape(-1).view(torch.uint8).numpy())


class WeightsCorrupt(RuntimeError):
    """An engine worker received a tensor whose bytes differ from what the trainer published (corrupt in
    transit, or another version's), or a replica's probe of a loaded version differs from the trainer's
    past its tolerance: the engine does not generate from it, and stays paused until a good copy lands."""

    MARK = "weights corrupt:"  # opens the message, which crosses vLLM's RPC and Ray as text

    def __init__(self, sentence: str) -> None:
        super().__init__(f"{self.MARK} {sentence}")

    @classmethod
    def in_error(cls, error: BaseException) -> str | None:
        """The sentence of a WeightsCorrupt, also from the text of an error it became on its way (vLLM's
        RPC, Ray's task error), or None."""
        found = re.search(re.escape(cls.MARK) + r" ([^\n]*)", str(error))
        return found.group(1) if found else None

    @property
    def sentence(self) -> str:
        return self.in_error(self) or str(self)


@dataclass(frozen=True)
class WeightUpdate(ABC):
    """A published version of the policy's weights, as engines receive it (picklable, no tensors)."""

    version: int  # the trainer's version: the number of optimiser-step batches trained; 0 is the initial model
    # the digest of each tensor under the name it travels as, computed by the trainer when it published;
    # empty where the receiver is not flywheel's (vLLM's NCCL engine), which then checks nothing
    digests: dict[str, int] = field(default_factory=dict, kw_only=True, repr=False, hash=False)
    # the trainer's logprobs of the probe sequences under this version (weights/probe.py), None: no probe
    probe: Probe | None = field(default=None, kw_only=True, repr=False, hash=False)

    @property
    def group(self) -> str | None:
        """The process group its receivers must have joined (an id; a new one means join again), or None."""
        return None

    def join(self, rank: int) -> Any:
        """Run in each engine worker, once per ``group``: joins it as ``rank`` and returns the link
        ``receive`` takes (None without a group)."""
        return None

    @abstractmethod
    def receive(self, link: Any = None) -> Iterator[tuple[str, torch.Tensor]]:
        """The published tensors under every name of the published state dict, a tensor shared by
        several names (tied embeddings and lm_head) under each: vLLM-CPU's in-place reload rebuilds a
        layer's packed GEMM weights only when a tensor arrives under that layer's own name. Run in each
        engine worker while the update is the latest one published; ``link`` is what ``join`` returned."""

    def verified(self, link: Any = None) -> Iterator[tuple[str, torch.Tensor]]:
        """``receive``, each tensor checked against the trainer's digest before it is yielded (so never
        loaded when it differs); raises ``WeightsCorrupt`` naming the first tensor that differs or never came."""
        expected = dict(self.digests)
        for name, tensor in self.receive(link):
            published = expected.pop(name, None)
            if published is not None and (received := digest(tensor)) != published:
                raise WeightsCorrupt(
                    f"weights version {self.version}: tensor {name} arrived with digest {received:016x}, the trainer published {published:016x}"
                )
            yield name, tensor
        if expected:
            raise WeightsCorrupt(f"weights version {self.version}: tensor {next(iter(expected))} never arrived ({len(expected)} missing)")


def split_aliases(state_dict: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The state dict's distinct tensors under their first name, and every further name of a tensor
    (one storage under several names, e.g. tied embeddings and lm_head) mapped to that first name."""
    first: dict[int, str] = {}
    unique: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state_dict.items():
        owner = first.setdefault(tensor.data_ptr(), name)
        if owner == name:
            unique[name] = tensor.detach().contiguous()
        else:
            aliases[name] = owner
    return unique, aliases


class WeightTransport(Protocol):
    """The trainer side of a transport."""

    def publish(self, state_dict: Mapping[str, torch.Tensor], version: int) -> WeightUpdate:
        """Makes ``state_dict`` receivable as ``version`` and returns its handle. Publishing a version
        retires the earlier ones: their handles may no longer be received."""
        ...

    def close(self) -> None:
        """Removes everything the transport published."""
        ...
