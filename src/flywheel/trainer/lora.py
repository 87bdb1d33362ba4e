"""LoRA adapter-only training (peft), with the engines receiving merged weights.

Invariants:

- ``add_adapters`` injects peft LoRA layers into the Hugging Face model *in place* (no ``PeftModel``
  wrapper): the module tree, the forward and ``model.model.layers`` stay those of the base model, so
  a trainer shards, calls and saves it as before. Only the adapters require grad; a fresh adapter has
  B = 0, so the model computes exactly the base model's function.
- Engines never see an adapter: ``merged_state_dict`` returns the full weights W + (alpha/r)·B·A under
  the base model's own parameter names (those of ``AutoModelForCausalLM.state_dict()``), so the weight
  transports and vLLM's in-place reload take them unchanged. It reads the live model and modifies
  nothing (peft's merge/unmerge would write into W and ``W + ΔW - ΔW`` is not W in floating point);
  untouched tensors are returned by reference, only the adapted matrices are new.
- The trainer (trainer/trainer.py) adds adapters before sharding, optimises the adapters alone,
  publishes ``merge_lora`` of the gathered full state dict, and checkpoints base and adapters in its
  sharded state (exact: merged weights would not restore the forward W·x + s·B·(A·x) bit for bit);
  ``adapter_state_dict`` is what an adapter-only sync would send (bench/lora.py measures it).
"""

from __future__ import annotations

from collections.abc import Mapping

import peft
import torch
from peft.tuners.lora import Linear as LoraLinear
from peft.tuners.lora import LoraLayer

from flywheel.config import LoraConfig

ADAPTER = "default"  # peft's adapter name; the only adapter a model has here


def add_adapters(model: torch.nn.Module, config: LoraConfig) -> torch.nn.Module:
    """Injects LoRA adapters (rank ``config.rank``) into ``config.target_modules`` of ``model`` in place
    and freezes everything else; returns ``model``. A is peft's Kaiming-uniform init (from torch's
    global RNG: seed first), B is zero."""
    if config.rank < 1:
        raise ValueError("add_adapters needs trainer.lora.rank >= 1")
    peft_config = peft.LoraConfig(
        r=config.rank, lora_alpha=config.alpha, lora_dropout=config.dropout, target_modules=list(config.target_modules), bias="none"
    )
    model = peft.inject_adapter_in_model(peft_config, model, adapter_name=ADAPTER)
    layers = {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}
    others = [name for name, module in layers.items() if not isinstance(module, LoraLinear)]
    if others:
        raise ValueError(f"trainer.lora.target_modules must name linear layers only; {others[0]} is a {type(layers[others[0]]).__name__}")
    return model


def lora_scaling(model: torch.nn.Module) -> float:
    """The factor s of the merged update W + s·B·A (alpha / rank), the same in every adapted layer."""
    scalings = {module.scaling[ADAPTER] for module in model.modules() if isinstance(module, LoraLayer)}
    if len(scalings) != 1:
        raise ValueError(f"expected one LoRA scaling across the model's adapters, found {sorted(scalings) or 'no adapters'}")
    return scalings.pop()


@torch.no_grad()
def merge_lora(state: Mapping[str, torch.Tensor], scaling: float) -> dict[str, torch.Tensor]:
    """The base model's state dict from the state dict of a model ``add_adapters`` made (peft names:
    ``<m>.base_layer.weight``, ``<m>.lora_A.default.weight``...): each adapted ``<m>.weight`` becomes
    W + scaling·B·A (computed in float32, returned in W's dtype), ``<m>.base_layer.<p>`` becomes
    ``<m>.<p>``, the adapters are dropped, and every other tensor is passed through by reference.

    Pure, on a full (gathered) state dict, so a sharded trainer calls it on the full state dict it
    gathers; ``merged_state_dict`` is the one-process shortcut.
    """
    merged: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if ".lora_A." in key or ".lora_B." in key:
            continue
        module, adapted, leaf = key.rpartition(".base_layer.")
        if not adapted:
            merged[key] = tensor
            continue
        if leaf == "weight":
            a, b = state[f"{module}.lora_A.{ADAPTER}.weight"], state[f"{module}.lora_B.{ADAPTER}.weight"]
            tensor = torch.addmm(tensor.float(), b.float(), a.float(), alpha=scaling).to(tensor.dtype)
        merged[f"{module}.{leaf}"] = tensor
    return merged


def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full weights W + (alpha/r)·B·A of a model ``add_adapters`` made, under the base model's
    parameter names, for the engines (the live model is not modified)."""
    return merge_lora(model.state_dict(), lora_scaling(model))


def adapter_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trained parameters (the adapters) under their live names, detached: what a checkpoint
    saves next to the optimiser; ``model.load_state_dict(adapters, strict=False)`` restores them."""
    return {name: param.detach() for name, param in model.named_parameters() if param.requires_grad}
