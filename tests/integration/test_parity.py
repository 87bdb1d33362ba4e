"""Trainer and engine agree on the logprobs of engine-sampled tokens, before and after a weight sync."""

import asyncio

import torch
from helpers import rollout
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.batch import build_batch
from flywheel.envs.arithmetic import make_splits
from flywheel.trainer.logprobs import token_logprobs


def mean_abs_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return token_mean((a - b).abs(), mask).item()


def test_trainer_and_engine_logprobs_agree_before_and_after_update(fresh_workers, config):
    config = config.model_copy(update={"trainer": config.trainer.model_copy(update={"lr": 3e-3})})
    workers = fresh_workers(config)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    problems = make_splits(1, 3, 32, 1)[0]

    before = asyncio.run(
        build_batch(rollout(workers, tokenizer, problems, config, seed=11), make_algorithm(config.algorithm), tokenizer.pad_token_id, workers.trainer)
    )
    diff_before = mean_abs_diff(asyncio.run(workers.trainer.logprobs(before)), before.behaviour_logprobs, before.loss_mask)
    assert diff_before < 1e-3

    assert before.advantages.abs().sum() > 0, "no learning signal in the batch"
    asyncio.run(workers.trainer.train_step(before))
    version = workers.sync_weights()
    assert version == 1

    groups = rollout(workers, tokenizer, problems, config, seed=12)
    assert {e.completion.weight_version for group in groups for e in group} == {1}
    after = asyncio.run(build_batch(groups, make_algorithm(config.algorithm), tokenizer.pad_token_id, workers.trainer))
    diff_after = mean_abs_diff(asyncio.run(workers.trainer.logprobs(after)), after.behaviour_logprobs, after.loss_mask)
    assert diff_after < 1e-3

    # The update was real: the initial weights disagree with the engine's new logprobs far more.
    initial = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    with torch.no_grad():
        stale = token_logprobs(initial, after.tokens, after.attention_mask)
    assert mean_abs_diff(stale, after.behaviour_logprobs, after.loss_mask) > 100 * max(diff_after, 1e-5)
