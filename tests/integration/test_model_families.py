"""The families small open models come in (Qwen2, Qwen3 with q/k norms, Llama), with tied input and
output embeddings as Qwen2.5 0.5B-3B, Qwen3 0.6B-4B and Llama 3.2 1B/3B have them: trainer and engine
logprobs of engine-sampled tokens agree on the initial weights and after a training step's weights are
synced (a stale output layer would fail the second check)."""

from __future__ import annotations

import asyncio

import pytest
import ray
import torch
from tiny_models import save_causal_lm
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.cluster.workers import start_engines
from flywheel.config import Config, ModelConfig
from flywheel.trainer.logprobs import token_logprobs
from flywheel.weights.file import FileTransport

TOLERANCE = 1e-4  # mean |trainer - engine| logprob per sampled token, float32 on both sides
PROMPTS = ["hello world", "1+2=", "The cat sat"]


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    started = not ray.is_initialized()
    yield
    if started:
        ray.shutdown()


def sample(engine, prompts: list[list[int]], seed: int) -> list[tuple[list[int], list[int], torch.Tensor]]:
    """(prompt, sampled tokens, engine logprobs) for 4 completions of each prompt."""
    groups = asyncio.run(engine.generate(prompts, 4, 1.0, 16, seed))
    return [(p, c.token_ids, torch.tensor(c.logprobs)) for p, group in zip(prompts, groups) for c in group]


def mean_abs_diff(model: torch.nn.Module, samples) -> float:
    """Mean over sampled tokens of |trainer logprob - engine logprob|."""
    diffs = []
    for prompt, tokens, engine_logprobs in samples:
        with torch.no_grad():
            trainer = token_logprobs(model, torch.tensor([prompt + tokens]), None)[0, len(prompt) :]
        diffs.append((trainer - engine_logprobs).abs())
    return torch.cat(diffs).mean().item()


def adamw_step(model: torch.nn.Module, samples) -> None:
    """One AdamW step on the sampled tokens' negative log-likelihood (it moves every parameter)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = -sum(token_logprobs(model, torch.tensor([p + t]), None)[0, len(p) :].sum() for p, t, _ in samples)
    loss.backward()
    optimizer.step()


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_tied_model_logprobs_agree_before_and_after_a_synced_step(family, tmp_path):
    path = save_causal_lm(tmp_path / "model", family=family, tied=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    state = model.state_dict()
    assert state["lm_head.weight"].data_ptr() == state["model.embed_tokens.weight"].data_ptr()  # both names, one storage
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    transport = FileTransport(tmp_path / "weights")
    [engine] = start_engines(Config(model=ModelConfig(path=str(path))))
    try:
        before = sample(engine, prompts, seed=1)
        diff_before = mean_abs_diff(model, before)
        assert diff_before < TOLERANCE

        adamw_step(model, before)
        asyncio.run(engine.load_weights(transport.publish(model.state_dict(), version=1)))
        after = sample(engine, prompts, seed=2)
        diff_after = mean_abs_diff(model, after)
        moved = mean_abs_diff(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), after)
        print(f"{family}: mean |trainer - engine| before {diff_before:.2e}, after {diff_after:.2e}; initial weights' {moved:.2e}")
        assert diff_after < TOLERANCE
        assert moved > 100 * TOLERANCE  # the step moved the engine's logprobs
    finally:
        engine.shutdown()
        transport.close()
