"""Weight transport through a collective: trainer rank 0 broadcasts each version to every engine worker.

One process group for all engines: the trainer's sender is rank 0, engine replica e's workers are
ranks 1 + e·W .. (W workers per engine, 1 as flywheel starts engines; vLLM adds a worker's own rank
to the offset). One broadcast then serves every replica: NCCL pipelines it along a ring or tree, so
the trainer sends its bytes once and a replica costs it nothing more; gloo's root still sends to
each peer. The price: every engine must receive every version (an engine that never does stalls the
send until ``timeout_s``, and the error surfaces at the next publish).

Membership: the group's engine members are replica slots (``members``); a worker's group rank is 1 +
its slot's position there, so a group can leave a dead slot out. When a replica dies, the router
(rollout/router.py) asks the trainer to ``rejoin``: the transport settles the send in flight, leaves
the old group and forms a new one (a new store, port and session) of the live replicas plus any
replacement, and sends the last published version again; every member loads it, the replacement
before it takes requests. A member dying in the middle of a send fails the send fast instead of
stalling it: the member that feeds it (gloo broadcasts along a tree) sees its connection close, and
whoever fails shuts its end of the group down, which fails everyone still waiting on it. A failed
send leaves a surviving engine with a mix of the two versions (each layer whole: vLLM's layerwise
reload swaps a layer in once all of its tensors arrived), labelled with the older one, until the
re-sent version lands. A member that dies while a group forms, or whose host vanishes without
closing its connections, still stalls it until ``timeout_s``.

The group forms at the first publish: the trainer opens its rendezvous store at once and joins in
a background thread; each engine joins when its first update arrives (vLLM's
``init_weight_transfer_engine`` runs ``CollectiveWeights.join`` in every worker).

Publishing snapshots the weights into buckets (a copy: the trainer's next step changes the live
tensors), takes each tensor's digest there (gloo: the receivers check them) and returns; a background thread broadcasts the buckets while the engines receive them
inside vLLM's update session (``start_weight_update`` / ``update_weights`` / ``finish_weight_update``)
and while the trainer runs its next step. The next publish first waits for that send.

Backends: gloo (TCP, CPU tensors; flywheel's engine receives, engines/vllm_transfer.py) and nccl
(GPU tensors; vLLM's own NCCL engine receives what vLLM's packed producer sends). Over gloo a tied
tensor travels once and the receivers yield it under each of its names; over NCCL it travels once
per name, since vLLM's engine loads exactly the names it is sent.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from math import prod
from typing import Any

import ray
import torch
from torch.distributed import BroadcastOptions, ProcessGroupGloo, TCPStore

from flywheel.config.weights import CollectiveTransportConfig
from flywheel.weights.base import WeightUpdate, digest, split_aliases

ALIGN = 64  # bytes: every tensor starts at a multiple of this in its bucket, so its typed view is aligned


@dataclass(frozen=True)
class Slot:
    """Where one tensor travels: ``nbytes`` bytes at ``offset`` in its bucket."""

    name: str
    dtype: str  # a torch dtype's name, e.g. "bfloat16"
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * getattr(torch, self.dtype).itemsize


def plan_buckets(tensors: Mapping[str, torch.Tensor], bucket_bytes: int) -> list[list[Slot]]:
    """The tensors in order, cut into buckets of at most ``bucket_bytes`` (a larger tensor alone in
    a bucket of its own), each tensor at an offset aligned to ``ALIGN`` bytes."""
    buckets: list[list[Slot]] = [[]]
    end = 0
    for name, tensor in tensors.items():
        slot = Slot(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), -(-end // ALIGN) * ALIGN)
        if buckets[-1] and slot.offset + slot.nbytes > bucket_bytes:
            buckets.append([])
            slot = Slot(slot.name, slot.dtype, slot.shape, 0)
        buckets[-1].append(slot)
        end = slot.offset + slot.nbytes
    return [b for b in buckets if b]


def bucket_bytes(bucket: list[Slot]) -> int:
    return bucket[-1].offset + bucket[-1].nbytes


def pack(tensors: Mapping[str, torch.Tensor], bucket: list[Slot], buffer: torch.Tensor | None = None) -> torch.Tensor:
    """A copy of the bucket's tensors, laid out as planned, in one uint8 buffer (``buffer`` when given)."""
    buffer = torch.empty(bucket_bytes(bucket), dtype=torch.uint8) if buffer is None else buffer
    for name, view in unpack(buffer, bucket):
        view.copy_(tensors[name])
    return buffer


def unpack(buffer: torch.Tensor, bucket: list[Slot]) -> Iterator[tuple[str, torch.Tensor]]:
    """The bucket's tensors as views of ``buffer``."""
    for slot in bucket:
        yield slot.name, buffer[slot.offset : slot.offset + slot.nbytes].view(getattr(torch, slot.dtype)).view(slot.shape)


def broadcast(group: ProcessGroupGloo, buffer: torch.Tensor):
    """Starts broadcasting ``buffer`` from rank 0 (into it, elsewhere); returns the work to wait on."""
    options = BroadcastOptions()
    options.rootRank = 0
    return group.broadcast([buffer], options)


def _receiving(group: ProcessGroupGloo, bucket: list[Slot]):
    """Starts receiving ``bucket``; returns a call that waits for it and returns its buffer."""
    buffer = torch.empty(bucket_bytes(bucket), dtype=torch.uint8)
    work = broadcast(group, buffer)

    def arrived() -> torch.Tensor:
        work.wait()
        return buffer

    return arrived


@dataclass(frozen=True)
class CollectiveWeights(WeightUpdate):
    """Version ``version``, broadcast from rank 0 of the group whose store listens at ``host:port``."""

    backend: str  # "gloo" or "nccl"
    host: str
    port: int
    session: str  # tells this group from an earlier one at the same address
    world_size: int
    buckets: tuple[tuple[Slot, ...], ...]
    aliases: dict[str, str]  # a further name of a tensor -> the name it travels under
    bucket_bytes: int
    timeout_s: float
    members: tuple[int, ...] = ()  # the engine replica slots in the group, in rank order (ranks 1, 2, ...)

    @property
    def group(self) -> str:
        return f"{self.backend}://{self.host}:{self.port}/{self.session}"

    def rank(self, slot_rank: int) -> int:
        """The group rank of the engine worker whose rank by replica slot is ``slot_rank`` (1 + slot:
        one worker per replica, as flywheel starts engines)."""
        if slot_rank - 1 not in self.members:
            raise ValueError(f"engine replica {slot_rank - 1} is not a member of weight group {self.group} (members {list(self.members)})")
        return 1 + self.members.index(slot_rank - 1)

    def join(self, rank: int) -> ProcessGroupGloo:
        """Joins the gloo group as the worker of slot rank ``rank`` (blocks until every member has joined)."""
        timeout = timedelta(seconds=self.timeout_s)
        store = TCPStore(self.host, self.port, self.world_size, is_master=False, timeout=timeout)
        return ProcessGroupGloo(store, self.rank(rank), self.world_size, timeout)

    def names(self, name: str) -> list[str]:
        """Every name of the tensor that travels as ``name``."""
        return [name, *(alias for alias, owner in self.aliases.items() if owner == name)]

    def receive(self, link: ProcessGroupGloo) -> Iterator[tuple[str, torch.Tensor]]:
        """Receives bucket after bucket, yielding each tensor under each of its names; the next bucket
        arrives while the model loads this one (two in memory at a time)."""
        incoming = _receiving(link, list(self.buckets[0]))
        for i, bucket in enumerate(self.buckets):
            buffer = incoming()
            if i + 1 < len(self.buckets):
                incoming = _receiving(link, list(self.buckets[i + 1]))
            for name, tensor in unpack(buffer, list(bucket)):
                for each in self.names(name):
                    yield each, tensor

    def wire_order(self) -> list[tuple[Slot, str]]:
        """(slot, name) in NCCL send order: each tensor under each of its names."""
        return [(slot, name) for bucket in self.buckets for slot in bucket for name in self.names(slot.name)]

    def nccl_init_info(self, rank_offset: int) -> dict[str, Any]:
        """The payload of vLLM's NCCL engine's ``init_weight_transfer_engine`` (its NCCLWeightTransferInitInfo)."""
        return {
            "master_address": self.host,
            "master_port": self.port,
            "rank_offset": self.rank(rank_offset),
            "world_size": self.world_size,
            "packed": True,
            "packed_buffer_size_bytes": self.bucket_bytes,
            "packed_num_buffers": 2,
        }

    def nccl_update_info(self) -> dict[str, Any]:
        """The payload of vLLM's NCCL engine's ``update_weights`` (its NCCLWeightTransferUpdateInfo)."""
        order = self.wire_order()
        return {"names": [n for _, n in order], "dtype_names": [s.dtype for s, _ in order], "shapes": [list(s.shape) for s, _ in order]}


@dataclass
class CollectiveTransport:
    """Trainer rank 0's side: the group's rendezvous store, its end of the group, the send in flight.
    Picklable until its first publish (it travels to the trainer actors unopened)."""

    config: CollectiveTransportConfig
    engines: int
    _host: str | None = field(default=None, init=False)
    _port: int = field(default=0, init=False)
    _session: str = field(default="", init=False)
    _buffers: list[torch.Tensor] = field(default_factory=list, init=False, repr=False)  # the last snapshot's, reused when the layout repeats
    _layout: list[list[Slot]] = field(default_factory=list, init=False, repr=False)
    _link: Link | None = field(default=None, init=False, repr=False)  # this end of the current group
    _sending: Future | None = field(default=None, init=False, repr=False)
    _members: tuple[int, ...] = field(default=(), init=False)  # the engine replica slots of the group
    _last: CollectiveWeights | None = field(default=None, init=False, repr=False)  # the last version published
    _pairs: list[tuple[str, torch.Tensor]] = field(default_factory=list, init=False, repr=False)  # its NCCL snapshot

    def __post_init__(self) -> None:
        self._members = tuple(range(self.engines))

    @classmethod
    def from_config(cls, config: CollectiveTransportConfig, engines: int) -> CollectiveTransport:
        return cls(config, engines)

    @property
    def world_size(self) -> int:
        return 1 + len(self._members)

    def publish(self, state_dict: Mapping[str, torch.Tensor], version: int) -> CollectiveWeights:
        """Waits for the previous send, snapshots ``state_dict`` and starts sending it; returns at once."""
        self.wait()
        backend = self.config.resolved_backend(torch.cuda.is_available())
        unique, aliases = split_aliases(state_dict)
        size = int(self.config.bucket_mb * 2**20)
        buckets = plan_buckets(unique, size)
        if backend == "gloo":
            if buckets != self._layout:  # fresh pages cost more than the copy: keep the buffers while the layout holds
                self._buffers, self._layout = [torch.empty(bucket_bytes(b), dtype=torch.uint8) for b in buckets], buckets
            for bucket, buffer in zip(buckets, self._buffers):
                pack(unique, bucket, buffer)
            digests = {name: digest(view) for bucket, buffer in zip(buckets, self._buffers) for name, view in unpack(buffer, bucket)}
        else:
            digests = {}  # vLLM's NCCL engine receives: nothing would check them
        if self._link is None:
            self._open(backend)
        update = CollectiveWeights(
            version,
            backend,
            self._host,
            self._port,
            self._session,
            self.world_size,
            tuple(map(tuple, buckets)),
            aliases,
            size,
            self.config.timeout_s,
            self._members,
            digests=digests,
        )
        if backend == "nccl":
            snapshot = {name: tensor.to("cuda", copy=True) for name, tensor in unique.items()}
            self._pairs = [(name, snapshot[slot.name]) for slot, name in update.wire_order()]
        self._last = update
        self._start_send(update)
        return update

    def rejoin(self, replicas: Sequence[int]) -> CollectiveWeights | None:
        """Re-forms the group with the engine replica slots ``replicas`` (the live ones and any
        replacement) and sends the last published version to it again; returns its handle in the new
        group, which every one of them must load (None before the first publish). The send in flight
        is abandoned, not awaited: a dead member may hold it until ``timeout_s`` (a process that
        outlives its engine keeps its connection open); it carries no newer version than the re-sent one."""
        self._leave()
        self._members = tuple(sorted(replicas))
        if self._last is None:
            return None
        self._open(self._last.backend)
        self._last = replace(self._last, host=self._host, port=self._port, session=self._session, world_size=self.world_size, members=self._members)
        self._start_send(self._last)
        return self._last

    def _start_send(self, update: CollectiveWeights) -> None:
        link = self._link
        if update.backend == "gloo":
            self._sending = link.sender.submit(self._send_gloo, link, self._buffers)
        else:
            self._sending = link.sender.submit(self._send_nccl, link, self._pairs, update.bucket_bytes)

    def _open(self, backend: str) -> None:
        """Chooses the group's address (this node's, as Ray sees it) and, for gloo, starts its store."""
        self._host, self._session = ray.util.get_node_ip_address(), secrets.token_hex(8)
        store = None
        if backend == "gloo":
            store = TCPStore(self._host, 0, self.world_size, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=self.config.timeout_s))
            self._port = store.port
        else:  # vLLM's StatelessProcessGroup starts the store itself, at a port chosen here
            with socket.socket() as s:
                s.bind(("", 0))
                self._port = s.getsockname()[1]
        self._link = Link(store, self.world_size, ThreadPoolExecutor(1, thread_name_prefix="weights-send"))

    def _send_gloo(self, link: Link, buffers: list[torch.Tensor]) -> None:
        if link.group is None:
            link.group = ProcessGroupGloo(link.store, 0, link.world_size, timedelta(seconds=self.config.timeout_s))
        try:
            for work in [broadcast(link.group, buffer) for buffer in buffers]:
                work.wait()
        except Exception:
            link.close()  # members still waiting on this end fail now, not at the timeout
            raise

    def _send_nccl(self, link: Link, pairs: list[tuple[str, torch.Tensor]], size: int) -> None:
        from vllm.distributed.weight_transfer.nccl_common import stateless_init_process_group
        from vllm.distributed.weight_transfer.packed_tensor import packed_nccl_broadcast_producer

        if link.group is None:
            link.group = stateless_init_process_group(self._host, self._port, 0, link.world_size, torch.cuda.current_device())
        packed_nccl_broadcast_producer(iter(pairs), link.group, 0, post_iter_func=lambda pair: pair[1], buffer_size_bytes=size, num_buffers=2)
        torch.cuda.synchronize()

    def wait(self) -> None:
        """Returns when the last publish has been sent to every engine; raises its error if it failed."""
        if self._sending is not None:
            sending, self._sending = self._sending, None
            sending.result()

    def _leave(self) -> None:
        """Leaves the current group without waiting for its send in flight; the next send forms a new one."""
        link, self._link, self._sending = self._link, None, None
        if link is not None:
            link.sender.shutdown(wait=False, cancel_futures=True)
            link.close()

    def close(self) -> None:
        """Leaves the group without waiting for a send in flight."""
        self._leave()
        self._last = None
        self._buffers, self._layout, self._pairs = [], [], []


@dataclass
class Link:
    """The sender's end of one group: its store, its process group once formed, the thread that sends to it."""

    store: TCPStore | None  # gloo's rendezvous (NCCL's is vLLM's own)
    world_size: int
    sender: ThreadPoolExecutor
    group: Any = None  # ProcessGroupGloo or vLLM's PyNcclCommunicator, formed by the first send

    def close(self) -> None:
        """Shuts a gloo group down: its connections close, so members waiting on this end fail at once."""
        group, self.group = self.group, None
        if isinstance(group, ProcessGroupGloo):
            group.shutdown()
