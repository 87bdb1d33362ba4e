"""LoRA through the real trainer group (2 ranks): the adapters alone train, the engine receives merged
weights, and its logprobs of the tokens it samples agree with the trainer's adapted model."""

import asyncio
from pathlib import Path

import torch
from helpers import SYNC, rollout
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.batch import build_batch
from flywheel.config import load_config
from flywheel.envs.arithmetic import make_splits

REPO = Path(__file__).resolve().parents[2]


def mean_abs_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return token_mean((a - b).abs(), mask).item()


def test_engine_serving_merged_lora_weights_agrees_with_the_trainer(fresh_workers):
    lora = ["trainer.lora.rank=8", "trainer.lora.alpha=16", "trainer.lr=1e-2", "trainer.ranks=2", "trainer.threads=1"]
    config = load_config(REPO / "configs/quickstart.yaml", [*SYNC, "run.progress=false", *lora])
    workers = fresh_workers(config)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    problems, algorithm = make_splits(1, 3, 32, 1)[0], make_algorithm(config.algorithm)

    def batch(seed: int):
        return asyncio.run(build_batch(rollout(workers, tokenizer, problems, config, seed=seed), algorithm, tokenizer.pad_token_id, workers.trainer))

    before = batch(seed=21)
    initial = asyncio.run(workers.trainer.logprobs(before))
    assert mean_abs_diff(initial, before.behaviour_logprobs, before.loss_mask) < 1e-3  # a fresh adapter (B = 0) is the base model
    asyncio.run(workers.trainer.train_step(before))
    assert workers.sync_weights() == 1

    after = batch(seed=22)
    diff = mean_abs_diff(asyncio.run(workers.trainer.logprobs(after)), after.behaviour_logprobs, after.loss_mask)
    moved = mean_abs_diff(asyncio.run(workers.trainer.logprobs(before)), initial, before.loss_mask)
    print(f"LoRA step: mean |trainer - engine| logprob {diff:.2e} over {int(after.loss_mask.sum())} tokens; the step moved them {moved:.2e}")
    assert diff < 1e-3  # test_parity's bound
    assert moved > 100 * max(diff, 1e-5)

    # merged weights under the base names; what LoRA does not target (embeddings, norms, lm_head) is untouched
    published = load_file(str(asyncio.run(workers.trainer.publish_weights()).path))
    base = AutoModelForCausalLM.from_pretrained(config.model.path).state_dict()
    assert published.keys() == base.keys()
    untargeted = [name for name in base if not any(m in name for m in config.trainer.lora.target_modules)]
    assert untargeted and all(torch.equal(published[name], base[name]) for name in untargeted)
    assert not torch.equal(published["model.layers.0.self_attn.q_proj.weight"], base["model.layers.0.self_attn.q_proj.weight"])
