"""The families small open models come in (Qwen2, Qwen3 with q/k norms, Llama), with tied input and
output embeddings as Qwen2.5 0.5B-3B, Qwen3 0.6B-4B and Llama 3.2 1B/3B have them: trainer and engine
logprobs of engine-sampled tokens agree on the initial weights and after a training step's weights are
synced (a stale output layer would fail the second check). Qwen2's weights travel through the collective
transport (gloo; the tied tensor sent once, received under both names), the others' through a file."""

from __future__ import annotations

import asyncio

import pytest
import torch
from tiny_models import save_causal_lm
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.algorithms.aggregation import token_mean
from flywheel.cluster.workers import Workers, engine_group, start_engines, start_trainer, trainer_spec
from flywheel.config import Config, ModelConfig, TrainerConfig
from flywheel.config.weights import CollectiveTransportConfig
from flywheel.types import Episode, TrainBatch, collate
from flywheel.weights.collective import CollectiveTransport
from flywheel.weights.file import FileTransport

TOLERANCE = 1e-4  # mean |trainer - engine| logprob per sampled token, float32 on both sides
PROMPTS = ["hello world", "1+2=", "The cat sat"]


def sample(workers: Workers, prompts: list[list[int]], seed: int) -> TrainBatch:
    """4 completions of each prompt as a batch with random advantages (a step that moves every parameter)."""
    groups = asyncio.run(workers.engines[0].generate(prompts, 4, 1.0, 16, seed))
    batch = collate([Episode(p, c, 0.0) for p, group in zip(prompts, groups) for c in group], pad_id=0)
    return TrainBatch(batch.tokens, batch.attention_mask, batch.loss_mask, batch.behaviour_logprobs, torch.randn(len(batch), 1) * batch.loss_mask)


def mean_abs_diff(workers: Workers, batch: TrainBatch) -> float:
    """Mean over sampled tokens of |trainer logprob - engine logprob|."""
    return token_mean((asyncio.run(workers.trainer.logprobs(batch)) - batch.behaviour_logprobs).abs(), batch.loss_mask).item()


@pytest.mark.parametrize("family, transport", [("qwen2", "collective"), ("qwen3", "file"), ("llama", "file")])
def test_tied_model_logprobs_agree_before_and_after_a_synced_step(family, transport, shared_engine, tmp_path):
    """A two-rank trainer group (FSDP2 shards the tied embedding once) trains a step; rank 0 publishes
    the gathered weights, the engine loads them."""
    path = save_causal_lm(tmp_path / "model", family=family, tied=True)
    state = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()
    assert state["lm_head.weight"].data_ptr() == state["model.embed_tokens.weight"].data_ptr()  # both names, one storage
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    config = Config(model=ModelConfig(path=str(path)), trainer=TrainerConfig(ranks=2, threads=1, lr=1e-2, minibatches=1))
    torch.manual_seed(0)
    publisher = (
        CollectiveTransport(CollectiveTransportConfig(bucket_mb=0.5), engines=1) if transport == "collective" else FileTransport(tmp_path / "w")
    )
    workers = Workers(start_engines(engine_group(config)), start_trainer(trainer_spec(config), publisher))
    try:
        before = sample(workers, prompts, seed=1)
        diff_before = mean_abs_diff(workers, before)
        assert diff_before < TOLERANCE

        asyncio.run(workers.trainer.train_step(before))
        assert workers.sync_weights() == 1
        after = sample(workers, prompts, seed=2)
        diff_after = mean_abs_diff(workers, after)
        moved = token_mean((asyncio.run(workers.trainer.logprobs(before)) - before.behaviour_logprobs).abs(), before.loss_mask).item()
        print(f"{family}: mean |trainer - engine| before {diff_before:.2e}, after {diff_after:.2e}; the step moved logprobs {moved:.2e}")
        assert diff_after < TOLERANCE
        assert moved > 100 * TOLERANCE  # the step moved the engine's logprobs
    finally:
        workers.shutdown()
