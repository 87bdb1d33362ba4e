"""Builds the shipped tiny policy in assets/tiny-adder: tokenizer, Qwen2 model, supervised warm-up.

Deterministic: rerunning it writes the same files (fixed seeds, one thread, deterministic kernels).

    .venv/bin/python assets/make_tiny_model.py
    .venv/bin/python assets/make_tiny_model.py --target 0.9 --out DIR    # the same model, warmed up further: a teacher

The warm-up trains on synthetic problems of the quickstart task (a seed disjoint from the RL splits)
and stops as soon as the model's expected sampled accuracy on a validation set reaches
``TARGET_ACCURACY``: a model that knows the format and half-knows the task, which RL then improves.
The expected sampled accuracy at temperature 1 is exact, not estimated: it is the mean over
problems of the probability the model gives the whole answer (digits and end-of-sequence), read
from one teacher-forced forward pass.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from flywheel.envs.arithmetic import ALPHABET, make_splits
from flywheel.trainer.logprobs import token_logprobs

OUT = Path(__file__).resolve().parent / "tiny-adder"
SEED = 1234  # the RL task splits use other seeds (configs/quickstart.yaml)
QUICKSTART_SPLITS = dict(seed=0, digits=3, train_size=5000, eval_size=200)  # its held-out problems are never trained on
DIGITS = 3
TARGET_ACCURACY = 0.30
BATCH = 128
LR = 2e-3
MAX_STEPS = 4000
EVAL_EVERY = 25
SPECIALS = ["<pad>", "<eos>", "<unk>"]


def build_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(ALPHABET))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")


def build_model(tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,  # warm-up is tied (it learns the task ~3x faster); the shipped model is untied
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    return Qwen2ForCausalLM(config)


def encode(tokenizer, problems) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids of prompt+answer+eos, and a mask of the answer and eos positions."""
    rows, masks = [], []
    for p in problems:
        prompt = tokenizer.encode(p.prompt)
        answer = tokenizer.encode(p.answer) + [tokenizer.eos_token_id]
        rows.append(prompt + answer)
        masks.append([0] * len(prompt) + [1] * len(answer))
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(rows), width))
    for i, (r, m) in enumerate(zip(rows, masks)):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(m)] = torch.tensor(m, dtype=torch.float)
    return ids, mask


def answer_logprobs(model, ids, mask) -> torch.Tensor:
    """Sum over answer tokens of log p(token), one value per row."""
    return (token_logprobs(model, ids, attention_mask=None) * mask).sum(-1)  # right padding: no mask needed


def untie(model: Qwen2ForCausalLM) -> None:
    """Gives lm_head its own copy of the embeddings: the same function. The shipped model has been
    untied since a tied lm_head went stale in vLLM's in-place reload; the weight transport now
    delivers tied weights under every name, and the model stays untied so that it is unchanged."""
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=TARGET_ACCURACY, help="stop at this expected sampled accuracy")
    parser.add_argument("--out", type=Path, default=OUT, help="the model directory written")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help="stop after this many steps whatever the accuracy")
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    _, held_out = make_splits(**QUICKSTART_SPLITS)
    train, val = make_splits(SEED, DIGITS, train_size=20000, eval_size=500)
    never = set(held_out)
    train = [p for p in train if p not in never]
    val_ids, val_mask = encode(tokenizer, val)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    rng = random.Random(SEED)
    accuracy = 0.0
    for step in range(1, args.max_steps + 1):
        ids, mask = encode(tokenizer, rng.sample(train, BATCH))
        loss = -answer_logprobs(model, ids, mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % EVAL_EVERY == 0:
            with torch.no_grad():
                accuracy = answer_logprobs(model, val_ids, val_mask).exp().mean().item()
            print(f"step {step} loss {loss.item():.4f} expected sampled accuracy {accuracy:.3f}")
            if accuracy >= args.target:
                break
    untie(model)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    model.generation_config.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    (args.out / "warmup.json").write_text(json.dumps({"steps": step, "expected_sampled_accuracy": round(accuracy, 4)}) + "\n")


if __name__ == "__main__":
    main()
