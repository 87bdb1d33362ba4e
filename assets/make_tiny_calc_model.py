"""Builds assets/tiny-calc: a character-level tokenizer with a chat template, a small Qwen2, and a
supervised warm-up on calculator-tool episodes, for the ``calculator`` environment's demo.

Deterministic: rerunning it writes the same files (fixed seeds, one thread, deterministic kernels).

    .venv/bin/python assets/make_tiny_calc_model.py

The warm-up data are episodes of the calculator environment built with the rollout's own
token-in/token-out code (``flywheel.envs.episode``), so they have exactly the token layout RL
will produce. Half of them are tool demonstrations (call ``calculate``, then copy its result); the
other half answer directly, which a model this small cannot compute: the warm-up model calls the
tool about half of the time, and RL can then raise both its tool-call rate and its accuracy.
Training stops at ``MAX_STEPS`` or once the expected probability of a fully correct tool call,
read from one teacher-forced pass on held-out demonstrations, reaches ``TARGET_CALL_PROB``.
Embeddings are untied, like the tiny-adder's (tied models work too; this one stays as shipped).
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import torch
from tokenizers import pre_tokenizers
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

from flywheel.envs.calculator import CalculatorEnv
from flywheel.envs.episode import Renderer, Transcript, env_messages
from flywheel.trainer.logprobs import token_logprobs
from flywheel.types import Completion

OUT = Path(__file__).resolve().parent / "tiny-calc"
SEED = 1234  # the demo's RL and eval tasks use other seeds
DEMOS = 400  # episodes; half call the tool
HELD_OUT = 64
BATCH = 32
LR = 2e-3
MAX_STEPS = 1500
EVAL_EVERY = 50
TARGET_CALL_PROB = 0.5
MAX_POSITIONS = 256
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>"]  # one token each, not special: they stay in the model's text
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_tokenizer() -> Qwen2Tokenizer:
    """Qwen2's own tokenizer class (byte-level BPE) with one token per printable ASCII character and no merges.

    transformers loads any tokenizer of a ``qwen2`` model as ``Qwen2Tokenizer``, rebuilt from its vocabulary and
    merges; a tokenizer of that class from the start loads back identically (in vLLM too).
    """
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    chars = [byte_level.pre_tokenize_str(c)[0][0] for c in sorted(set(string.printable) - set("\t\r\x0b\x0c"))]
    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars)}
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=[], unk_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", extra_special_tokens=["<|im_start|>"]
    )
    tokenizer.add_tokens(ADDED)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = MAX_POSITIONS  # the rollout ends an episode before its context overflows
    return tokenizer


def build_model(tokenizer: Qwen2Tokenizer) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    return Qwen2ForCausalLM(config)


def demonstration(tokenizer, renderer: Renderer, prompt: str, answer: str, use_tool: bool) -> tuple[list[int], list[int], list[int]]:
    """(ids, loss mask, mask of the first model turn) of one episode, as the rollout would assemble it."""
    episode = Transcript(*renderer.prompt(prompt))

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    if use_tool:
        expression = prompt.removeprefix("What is ").removesuffix("?")
        call = f"<tool_call>{json.dumps({'name': 'calculate', 'arguments': {'expression': expression}})}</tool_call>"
        episode.add_model_turn(Completion(encode(call), [0.0] * len(encode(call)), call, (0,) * len(encode(call))))
        first_turn = len(episode.ids)
        tool = env_messages([answer], "tool")
        episode.add_env_turn(renderer.env_turn(episode.messages, episode.ids, tool), tool)
    else:
        first_turn = None
    final = encode(answer) + [tokenizer.eos_token_id]
    episode.add_model_turn(Completion(final, [0.0] * len(final), answer, (0,) * len(final)))
    prompt_mask = [0] * len(episode.prompt_ids)
    first = prompt_mask + [1 if first_turn and i < first_turn else 0 for i in range(len(episode.ids))]
    return episode.context, prompt_mask + episode.loss_mask, first


def pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


def main() -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    env = CalculatorEnv()
    renderer = Renderer(tokenizer, env.system_prompt, env.tools)
    tasks = env.tasks(DEMOS + HELD_OUT, seed=SEED)
    demos = [demonstration(tokenizer, renderer, t.prompt, t.answer, use_tool=i % 2 == 0) for i, t in enumerate(tasks[:DEMOS])]
    held_out = [demonstration(tokenizer, renderer, t.prompt, t.answer, use_tool=True) for t in tasks[DEMOS:]]
    val_ids, val_first = pad([d[0] for d in held_out], tokenizer.pad_token_id), pad([d[2] for d in held_out], 0).float()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    rng = random.Random(SEED)
    call_prob = 0.0
    for step in range(1, MAX_STEPS + 1):
        batch = rng.sample(demos, BATCH)
        ids, mask = pad([d[0] for d in batch], tokenizer.pad_token_id), pad([d[1] for d in batch], 0).float()
        loss = -(token_logprobs(model, ids, attention_mask=None) * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % EVAL_EVERY == 0:
            with torch.no_grad():  # exact probability of sampling the whole correct call, given the tool path
                call_prob = (token_logprobs(model, val_ids, attention_mask=None) * val_first).sum(-1).exp().mean().item()
            print(f"step {step} loss {loss.item():.4f} p(correct first call) {call_prob:.3f}", flush=True)
            if call_prob >= TARGET_CALL_PROB:
                break
    OUT.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)
    model.generation_config.save_pretrained(OUT)
    tokenizer.save_pretrained(OUT)
    (OUT / "warmup.json").write_text(json.dumps({"steps": step, "correct_first_call_prob": round(call_prob, 4)}) + "\n")


if __name__ == "__main__":
    main()
