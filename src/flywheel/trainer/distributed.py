"""What one trainer rank needs from torch.distributed: joining the group, loading a model sharded
with FSDP2 (one shard group per decoder layer, then the root; fp32 master weights, compute in the
configured dtype), gathering full weights, and combining per-rank numbers."""

from __future__ import annotations

import importlib.util
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoConfig

from flywheel.config import Config, LoraConfig
from flywheel.trainer.attention import VARLEN
from flywheel.trainer.lora import add_adapters

MEETING_TIMEOUT = timedelta(minutes=30)


def open_store(host: str) -> dist.TCPStore:
    """The TCP store a group of several ranks meets at, served by this process at ``host`` (the address the ranks
    reach it by) on a port the OS picks as it binds: no other process can take the port between a pick and the bind."""
    return dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=MEETING_TIMEOUT)


def store_address(store: dist.TCPStore) -> str:
    return f"{store.host}:{store.port}"


def join(rank: int, world_size: int, store: str | None, device: int = 0) -> DeviceMesh:
    """Joins the trainer group (gloo on CPU, NCCL for tensors on GPU) and returns its 1-D mesh: one rank through
    an in-process store, several through the TCP store at ``store`` ("host:port", ``open_store``). A process that
    already belongs to a group of ``world_size`` (several one-rank trainers in one test process) reuses it.
    ``device``: the rank's GPU among those it sees (Ray shows each rank its own: 0; an MPI rank takes its
    node-local one, cluster/local_gpu.py)."""
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
        if world_size == 1:
            meeting = dist.HashStore()
        else:
            host, port = store.rsplit(":", 1)
            meeting = dist.TCPStore(host, int(port), is_master=False, timeout=MEETING_TIMEOUT)
        dist.init_process_group(backend, store=meeting, rank=rank, world_size=world_size, timeout=MEETING_TIMEOUT)
    if dist.get_world_size() != world_size:
        raise RuntimeError(f"this process already belongs to a group of {dist.get_world_size()} ranks, not {world_size}")
    if cuda:
        torch.cuda.set_device(device)
    return init_device_mesh("cuda" if cuda else "cpu", (world_size,))


def packed_attention() -> str:
    """Flash attention's varlen kernel where it is installed (GPU), else per-sequence SDPA."""
    return "flash_attention_2" if torch.cuda.is_available() and importlib.util.find_spec("flash_attn") else VARLEN


def load_sharded(model_class, config: Config, mesh: DeviceMesh, adapters: LoraConfig | None = None, **kwargs) -> torch.nn.Module:
    """``model_class.from_pretrained(model.path)`` in fp32 (with LoRA ``adapters``, only they train),
    sharded over ``mesh``; forward and backward compute in ``model.dtype``, gradients reduce in fp32.
    Every rank holds 1/N of every parameter, gradient and optimiser state. Gradients are summed over
    ranks, not averaged: each rank's loss is already its share of the step's loss.

    Only rank 0 reads the checkpoint (a whole fp32 copy in host memory, once); the other ranks build
    the model on the meta device, and every rank's shards and buffers are sent from rank 0's copy."""
    tc = config.trainer
    attention = packed_attention() if tc.packing else "sdpa"
    source = mesh.get_rank() == 0
    if source:
        model = model_class.from_pretrained(config.model.path, dtype=torch.float32, attn_implementation=attention, **kwargs)
    else:
        with torch.device("meta"):
            model_config = AutoConfig.from_pretrained(config.model.path, **kwargs)
            model = model_class.from_config(model_config, dtype=torch.float32, attn_implementation=attention)
    if adapters is not None:
        model = add_adapters(model, adapters)
    if tc.activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    full = model.state_dict() if source else {}  # the whole tensors, held until sent
    buffers = dict(model.named_buffers())  # non-persistent ones (rotary frequencies) are in no state dict
    policy = MixedPrecisionPolicy(param_dtype=getattr(torch, config.model.dtype), reduce_dtype=torch.float32)
    layers = [m for m in model.modules() if type(m).__name__ in (model._no_split_modules or ())]
    sharded = mesh.size() > 1
    for module in [*layers, model]:
        # One rank has nothing to free after the forward: it keeps the compute copy for the backward
        # rather than casting every weight again.
        fully_shard(module, mesh=mesh, mp_policy=policy, reshard_after_forward=sharded)
        if sharded:  # (one rank's "reduction" is a copy; a divide factor, even 1.0, adds a division)
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum
    if sharded:
        if not source:
            model.to_empty(device=mesh.device_type)
        set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
        for name, buffer in model.named_buffers():
            if source:
                buffer.copy_(buffers[name])
            dist.broadcast(buffer, src=0)
    return model


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded weights on CPU, on rank 0 (empty elsewhere); a collective: every rank calls it."""
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def all_gather(local: torch.Tensor) -> torch.Tensor:
    """[...] on every rank -> [world, ...] on every rank."""
    out = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(out, local)
    return torch.stack(out)


#: metrics that are shares of the step's loss (summed over micro-batches and ranks); "*_max" take
#: the maximum; every other metric is a weighted mean: by the micro-batch's loss tokens, or by the
#: weight it gives as a (value, weight) pair (a mean over a subset of the tokens), over the
#: micro-batches that report it.
SHARES = ("loss/policy", "loss/critic", "loss/user")


def combine_metrics(local: list[tuple[dict[str, float | tuple[float, float]], float]]) -> dict[str, float]:
    """(metrics, loss tokens) of each micro-batch of every rank -> the step's metrics, on every rank."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, local)
    rows = [row for rank in everyone for row in rank]
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for m, _ in rows for k in m):
        values = [m[key] if isinstance(m[key], tuple) else (m[key], w) for m, w in rows if key in m]
        if key in SHARES:
            out[key] = sum(v for v, _ in values)
        elif key.endswith("_max"):
            out[key] = max(v for v, _ in values)
        else:
            weight = sum(w for _, w in values)
            out[key] = sum(v * w for v, w in values) / weight if weight else 0.0
    return out
