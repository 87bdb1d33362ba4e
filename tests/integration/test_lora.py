"""LoRA: the engine serving the merged weights of a trained adapter samples with the logprobs the
adapted (peft) model computes."""

import asyncio

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.config import LoraConfig
from flywheel.envs.arithmetic import make_splits
from flywheel.trainer.logprobs import token_logprobs
from flywheel.trainer.lora import add_adapters, merged_state_dict
from flywheel.types import Completion
from flywheel.weights.file import FileTransport


def sample(engine, prompts: list[list[int]], config, seed: int) -> list[tuple[list[int], Completion]]:
    r = config.rollout
    groups = asyncio.run(engine.generate(prompts, r.group_size, r.temperature, r.max_new_tokens, seed))
    return [(prompt, c) for prompt, group in zip(prompts, groups) for c in group]


def padded(samples: list[tuple[list[int], Completion]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """tokens, attention mask, completion mask and engine logprobs (aligned with tokens), [B, T]."""
    width = max(len(p) + len(c.token_ids) for p, c in samples)
    tokens = torch.full((len(samples), width), pad)
    attention, completion, engine = (torch.zeros(len(samples), width) for _ in range(3))
    for i, (prompt, c) in enumerate(samples):
        n, m = len(prompt), len(c.token_ids)
        tokens[i, : n + m] = torch.tensor(prompt + c.token_ids)
        attention[i, : n + m] = 1
        completion[i, n : n + m] = 1
        engine[i, n : n + m] = torch.tensor(c.logprobs)
    return tokens, attention.long(), completion, engine


def mean_abs_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return ((a - b).abs() * mask).sum().item() / mask.sum().item()


def test_engine_serving_merged_lora_weights_agrees_with_the_adapted_model(shared_engine, config, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(t.prompt) for t in make_splits(1, 3, 32, 1)[0]]
    base = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    transport = FileTransport(tmp_path / "weights")
    try:
        asyncio.run(shared_engine.load_weights(transport.publish(base.state_dict(), version=0)))  # whatever earlier tests synced

        # One AdamW step of the adapters on the NLL of the initial model's own samples.
        torch.manual_seed(0)
        model = add_adapters(AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32), LoraConfig(rank=8, alpha=16))
        tokens, attention, completion, _ = padded(sample(shared_engine, prompts, config, seed=21), tokenizer.pad_token_id)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        loss = -(token_logprobs(model, tokens, attention) * completion).sum() / completion.sum()
        loss.backward()
        optimizer.step()

        asyncio.run(shared_engine.load_weights(transport.publish(merged_state_dict(model), version=1)))
        samples = sample(shared_engine, prompts, config, seed=22)
        assert {c.weight_version for _, c in samples} == {1}
        tokens, attention, completion, engine = padded(samples, tokenizer.pad_token_id)
        with torch.no_grad():
            adapted = token_logprobs(model, tokens, attention)
            stale = token_logprobs(base, tokens, attention)
        diff = mean_abs_diff(adapted, engine, completion)
        print(
            f"mean |trainer - engine| logprob {diff:.2e} over {int(completion.sum())} tokens; base model {mean_abs_diff(stale, engine, completion):.2e}"
        )
        assert diff < 1e-3  # test_parity's bound
        # The update was real: the base model's logprobs disagree with the engine's far more.
        assert mean_abs_diff(stale, engine, completion) > 100 * max(diff, 1e-5)
    finally:
        asyncio.run(shared_engine.load_weights(transport.publish(base.state_dict(), version=0)))  # the shipped weights again
        transport.close()
