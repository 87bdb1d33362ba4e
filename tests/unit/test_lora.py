"""LoRA adapters on the shipped tiny model (fp32): a fresh adapter changes nothing, a step trains only
the adapters, and the merged weights in a plain base model compute what the adapted model computes."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from flywheel.config import LoraConfig
from flywheel.trainer.logprobs import token_logprobs
from flywheel.trainer.lora import adapter_state_dict, add_adapters, lora_scaling, merge_lora, merged_state_dict

MODEL = Path(__file__).resolve().parents[2] / "assets/tiny-adder"
# fp32: W·x + s·B·(A·x) and (W + s·B·A)·x round differently. Measured after the step: max |Δlogit|
# 1.2e-4 (logits up to 14.5; mean |Δlogprob| 5e-6), the order of this model's own fp32 error (its
# fp32 logits differ from float64 ones by up to 5.8e-5); the step moved logits by up to 12.5.
MERGED_ATOL = 1e-3


def base_model() -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)


def lora_model(rank: int = 8, alpha: float = 16.0) -> torch.nn.Module:
    torch.manual_seed(0)
    return add_adapters(base_model(), LoraConfig(rank=rank, alpha=alpha))


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(2, 15, (4, 12), generator=generator)
    mask = torch.ones_like(tokens)
    mask[1, 9:] = 0  # one right-padded row
    return tokens, mask


@torch.no_grad()
def logits(model: torch.nn.Module) -> torch.Tensor:
    tokens, mask = batch()
    return model(input_ids=tokens, attention_mask=mask).logits


def trained_lora_model() -> torch.nn.Module:
    """One AdamW step (lr 1e-2) on the mean token NLL, over the trainable parameters only."""
    model = lora_model()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    tokens, mask = batch()
    loss = -(token_logprobs(model, tokens, mask)[:, 1:] * mask[:, 1:]).sum() / mask[:, 1:].sum()
    loss.backward()
    optimizer.step()
    return model


def test_fresh_adapter_computes_the_base_model_exactly():
    model = lora_model()
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
    # B = 0: W·x + s·B·(A·x) adds exact zeros
    assert torch.equal(logits(model), logits(base_model()))


def test_a_step_trains_only_the_adapters_and_the_merged_weights_match():
    before = {name: p.detach().clone() for name, p in lora_model().named_parameters()}
    model = trained_lora_model()
    for name, p in model.named_parameters():
        changed = not torch.equal(p.detach(), before[name])
        assert changed == p.requires_grad, name  # adapters all moved (B from 0, A by Adam's step), the base not at all

    adapted = logits(model)
    merged = merged_state_dict(model)
    assert torch.equal(logits(model), adapted)  # merging left the live model alone
    plain = base_model()
    plain.load_state_dict(merged, strict=True)
    diff = (logits(plain) - adapted).abs().max().item()
    assert diff < MERGED_ATOL
    # The update was real: the base model's logits are far from the adapted ones.
    assert (logits(base_model()) - adapted).abs().max().item() > 1000 * MERGED_ATOL  # 12.5 measured


def test_merged_state_dict_has_the_base_names_and_shares_untouched_tensors():
    model = trained_lora_model()
    base = base_model().state_dict()
    merged = merged_state_dict(model)
    assert list(merged) == list(base)
    assert all(merged[k].shape == base[k].shape and merged[k].dtype == base[k].dtype for k in base)
    live = model.state_dict()
    # Not adapted (embeddings, norms, lm_head, biases): the live tensors themselves, no copy.
    assert merged["model.embed_tokens.weight"].data_ptr() == live["model.embed_tokens.weight"].data_ptr()
    assert merged["model.layers.0.self_attn.q_proj.bias"].data_ptr() == live["model.layers.0.self_attn.q_proj.base_layer.bias"].data_ptr()
    # Adapted: exactly W + (alpha/r)·B·A (alpha 16, rank 8: s = 2).
    assert lora_scaling(model) == 2.0
    w = live["model.layers.0.self_attn.q_proj.base_layer.weight"]
    a, b = live["model.layers.0.self_attn.q_proj.lora_A.default.weight"], live["model.layers.0.self_attn.q_proj.lora_B.default.weight"]
    assert torch.equal(merged["model.layers.0.self_attn.q_proj.weight"], torch.addmm(w, b, a, alpha=2.0))


def test_merge_keeps_the_weight_dtype():
    state = {
        "m.base_layer.weight": torch.ones(2, 3, dtype=torch.bfloat16),
        "m.lora_A.default.weight": torch.full((1, 3), 0.5, dtype=torch.bfloat16),
        "m.lora_B.default.weight": torch.full((2, 1), 0.25, dtype=torch.bfloat16),
    }
    merged = merge_lora(state, scaling=4.0)
    # 1 + 4 · 0.25 · 0.5 = 1.5 in every entry, in bf16
    assert list(merged) == ["m.weight"] and merged["m.weight"].dtype == torch.bfloat16
    assert torch.equal(merged["m.weight"], torch.full((2, 3), 1.5, dtype=torch.bfloat16))


def test_adapter_state_dict_restores_the_trained_model():
    trained = trained_lora_model()
    adapters = adapter_state_dict(trained)
    assert sum(t.numel() for t in adapters.values()) == sum(p.numel() for p in trained.parameters() if p.requires_grad)
    fresh = lora_model()
    missing, unexpected = fresh.load_state_dict(adapters, strict=False)
    assert not unexpected and set(missing).isdisjoint(adapters)
    assert torch.equal(logits(fresh), logits(trained))


def test_only_linear_layers_take_adapters():
    with pytest.raises(ValueError, match="must name linear layers only; model.embed_tokens is a Embedding"):
        add_adapters(base_model(), LoraConfig(rank=4, target_modules=("embed_tokens",)))
