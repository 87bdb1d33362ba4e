"""Random-init tiny Qwen2 (and Qwen3, Llama) models with a one-character-per-token tokenizer over printable ASCII, built in seconds."""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
    Qwen3Config,
    Qwen3ForCausalLM,
)

SPECIALS = ["<pad>", "<eos>", "<unk>"]
CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: "
#: Causal-LM families by name: (config class, model class).
FAMILIES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}


def ascii_tokenizer() -> PreTrainedTokenizerFast:
    """Every printable ASCII character is one token; a plain `role: content` chat template."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS + sorted(set(string.printable)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", chat_template=CHAT_TEMPLATE)


def _config(tokenizer: PreTrainedTokenizerFast, config_class=Qwen2Config, **extra):
    # head_dim 32: vLLM-CPU attention has no kernel for 16
    return config_class(**{
        "vocab_size": len(tokenizer), "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id, "torch_dtype": "float32", **extra,
    })  # fmt: skip


def save_causal_lm(path: Path, seed: int = 0, family: str = "qwen2", tied: bool = False) -> Path:
    """A random tiny causal LM of ``family`` (a key of FAMILIES), its input and output embeddings
    tied if ``tied`` (what a judge server serves; what the model-family tests train)."""
    torch.manual_seed(seed)
    tokenizer = ascii_tokenizer()
    config_class, model_class = FAMILIES[family]
    model_class(_config(tokenizer, config_class, tie_word_embeddings=tied)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_classifier(path: Path, seed: int = 0) -> Path:
    """A random tiny one-label sequence classifier (a reward model)."""
    torch.manual_seed(seed)
    tokenizer = ascii_tokenizer()
    Qwen2ForSequenceClassification(_config(tokenizer, num_labels=1)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_perturbed(source: Path, path: Path, scale: float = 0.05, seed: int = 0) -> Path:
    """``source`` (a model directory) with Gaussian noise of ``scale`` times each tensor's std added to every
    weight: another model of the same tokenizer (a teacher whose distribution the student's is not)."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(source, path)
    generator = torch.Generator().manual_seed(seed)
    weights = load_file(str(path / "model.safetensors"))
    noisy = {name: t + scale * t.float().std().nan_to_num() * torch.randn(t.shape, generator=generator) for name, t in weights.items()}
    save_file({name: t.contiguous() for name, t in noisy.items()}, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path
