"""Asynchronous RL on the real engine: in-flight weight updates, the staleness bound, exactly-once
episodes through an engine crash, a lone engine's restart with the current weights, and equality
with generate-then-train at staleness 0."""

import asyncio
import json
import math
import os
import time
from pathlib import Path

import pytest
import ray
import torch
from helpers import SYNC, crashing_engine, exact_groups
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.cluster.workers import Workers, engine_group, engine_spec, engine_starter, start_trainer, trainer_spec
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.engines.remote import RemoteEngine
from flywheel.engines.vllm import VLLMEngine
from flywheel.envs.arithmetic import make_splits
from flywheel.rollout.stream import group_seed, prompt_indices
from flywheel.trainer.trainer import Trainer
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def run_config(tmp_path, *extra):
    return load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.progress=false",
            "rollout.prompts_per_step=8",
            "eval.every=100",
            "run.checkpoint_every=100",
            "run.dump_rollouts=true",
            f"run.output_dir={tmp_path}",
            *extra,
        ],
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_weights_land_while_requests_are_in_flight(shared_engine, config, tmp_path):
    """An update during generation: each token is labelled exactly with the weights that sampled it
    (vLLM's per-step labels): those after the update carry the new version and come from the new
    weights (here an lm_head of zeros, so every new token has logprob -log(vocab)), none before it does."""
    model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    uniform = {k: torch.zeros_like(v) if k == "lm_head.weight" else v for k, v in model.state_dict().items()}
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0]]  # several seconds of generation

    # the version the engine serves now (earlier tests moved it); the first step of an engine is slow, too
    old = asyncio.run(shared_engine.generate(prompts[:1], 1, 1.0, 8, 0))[0][0].weight_version
    new = old + 1
    update = FileTransport(tmp_path).publish(uniform, version=new)

    async def generate_and_update():
        generating = asyncio.create_task(shared_engine.generate(prompts, 8, 1.0, 8, 0))
        await asyncio.sleep(1.0)  # requests join and leave the running batch continuously: some are mid-way
        paused = (await shared_engine.load_weights(update)).pause_s
        return await generating, paused

    groups, paused = asyncio.run(generate_and_update())
    completions = [c for group in groups for c in group]
    uniform_logprob = -math.log(model.config.vocab_size)
    spanning = [c for c in completions if set(c.weight_versions) == {old, new}]
    assert spanning, "no completion spans the update: it did not land mid-generation"
    for c in completions:
        assert list(c.weight_versions) == sorted(c.weight_versions)  # versions never go back
        for version, logprob in zip(c.weight_versions, c.logprobs):
            if version == new:  # never labelled newer than the weights that produced it
                assert abs(logprob - uniform_logprob) < 1e-4, (c.weight_versions, c.logprobs)
    old_tokens = [lp for c in completions for v, lp in zip(c.weight_versions, c.logprobs) if v == old]
    assert old_tokens and not [lp for lp in old_tokens if abs(lp - uniform_logprob) < 1e-5]  # never labelled older either
    print(f"{len(spanning)}/{len(completions)} completions span the update; generation paused {paused * 1000:.0f} ms")
    assert paused < 5.0


def test_staleness_zero_equals_generate_then_train(fresh_workers, tmp_path):
    """max_staleness 0: the loop trains on exactly the groups a plain generate-then-train loop makes."""
    config = run_config(tmp_path, "run.steps=3")
    run_dir = train(config, fresh_workers(config))
    dumped = [row for row in read_jsonl(run_dir / "rollouts.jsonl") if row["fate"] == "trained"]
    losses = [row["loss/policy"] for row in read_jsonl(run_dir / "metrics.jsonl")[1:]]

    workers = fresh_workers(config)  # the same initial model, loaded by the engine
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    train_set = make_splits(config.task.seed, config.task.env_args["digits"], config.task.train_size, config.task.eval_size)[0]
    r, batch_size = config.rollout, config.rollout.prompts_per_step
    for step in range(1, 4):
        groups = []
        for position in range((step - 1) * batch_size, step * batch_size):
            problem = train_set[prompt_indices(len(train_set), position, 1, config.run.seed)[0]]
            prompt = tokenizer.encode(problem.prompt)
            [completions] = asyncio.run(
                workers.engines[0].generate([prompt], r.group_size, r.temperature, r.max_new_tokens, group_seed(config.run.seed, position))
            )
            groups.append(exact_groups(prompt, problem, completions))
        rows = dumped[(step - 1) * batch_size : step * batch_size]
        assert [row["position"] for row in rows] == list(range((step - 1) * batch_size, step * batch_size))
        assert [row["token_ids"] for row in rows] == [[e.completion.token_ids for e in g] for g in groups]
        assert all(set(sum(row["weight_versions"], [])) == {step - 1} for row in rows)
        batch = asyncio.run(build_batch(groups, make_algorithm(config.algorithm), tokenizer.pad_token_id, workers.trainer))
        assert asyncio.run(workers.trainer.train_step(batch)).metrics["loss/policy"] == losses[step - 1]
        workers.sync_weights()


def test_staleness_bound_holds_and_no_episode_is_lost_when_an_engine_dies(shared_engine, fresh_workers, tmp_path):
    """A slow trainer, a slow second engine that is killed mid-run, max_staleness 1: every trained
    token is at most one version old, and every admitted prompt ends exactly once (trained, dropped
    as stale, or pending at the end)."""

    class SlowTrainer(Trainer):
        def train_step(self, parts):
            time.sleep(0.5)
            return super().train_step(parts)

    class CrashingSlowEngine(VLLMEngine):
        """Slow, and its process dies in the middle of its first request once it serves version 3:
        that request (and any other it holds) is in flight when it dies, whatever the machine's load."""

        async def generate(self, *args, **kwargs):
            await asyncio.sleep(2.0)
            if self.weight_version >= 3:
                os._exit(1)
            return await super().generate(*args, **kwargs)

    config = run_config(tmp_path, "run.steps=8", "rollout.max_staleness=1")
    fresh_workers(config)  # the shared engine serves the initial weights
    slow_engine = ray.remote(CrashingSlowEngine).options(num_cpus=0.5, max_restarts=0).remote(engine_spec(config))
    slow_trainer = start_trainer(trainer_spec(config), FileTransport(tmp_path / "weights"), SlowTrainer)
    ray.get(slow_engine.__ray_ready__.remote())
    try:
        run_dir = train(config, Workers([shared_engine, RemoteEngine(slow_engine)], slow_trainer))
    finally:
        ray.kill(slow_engine)
        slow_trainer.shutdown()

    rows = read_jsonl(run_dir / "rollouts.jsonl")
    metrics = read_jsonl(run_dir / "metrics.jsonl")[1:]
    trained = [row for row in rows if row["fate"] == "trained"]
    assert len(trained) == 8 * 8
    for row in trained:
        assert row["trainer_version"] - min(sum(row["weight_versions"], [])) <= 1, row
    positions = sorted(row["position"] for row in rows)
    assert positions == list(range(len(positions))), "an admitted prompt was lost or duplicated"
    assert {row["fate"] for row in rows} <= {"trained", "stale", "pending"}
    assert sum(row["fate"] == "stale" for row in rows) == sum(m["rollout/dropped_stale"] for m in metrics)
    assert max(m["rollout/staleness_max"] for m in metrics) == 1, "the run never overlapped generation and training"
    assert metrics[-1]["engines/live"] == 1 and metrics[-1]["engines/resubmitted"] >= 1
    # a stale token's policy lag is behaviour KL, not trainer/engine mismatch: fp32 mismatch stays ~0 and never alerts
    assert all(m["train/mismatch_kl"] < 1e-3 for m in metrics if "train/mismatch_kl" in m) and all("train/behaviour_kl" in m for m in metrics)
    alerts = read_jsonl(run_dir / "alerts.jsonl") if (run_dir / "alerts.jsonl").exists() else []
    assert not [a for a in alerts if a["kind"] == "mismatch_spike"], alerts


@pytest.mark.slow
def test_a_lone_engine_that_dies_is_restarted_with_the_current_weights(fresh_workers, tmp_path):
    """The run's only engine dies mid-request once it serves version 2: the requests wait for its
    replacement, which loads the current weights before serving (synchronous, so every trained token
    carries the version the step trained on; a replacement serving the initial model would label
    them 0), and every admitted prompt still ends exactly once."""

    config = run_config(tmp_path, "run.steps=4")
    fresh_workers(config)  # the session's trainer retired; the shared engine is not in this run
    crashing = ray.remote(crashing_engine()).options(num_cpus=0.5, max_restarts=0).remote(engine_spec(config))
    trainer = start_trainer(trainer_spec(config), FileTransport(tmp_path / "weights"))
    ray.get(crashing.__ray_ready__.remote())
    try:
        run_dir = train(config, Workers([RemoteEngine(crashing)], trainer, engine_starter(engine_group(config, cpus=0.5))))
    finally:
        ray.kill(crashing)
        trainer.shutdown()

    rows = read_jsonl(run_dir / "rollouts.jsonl")
    metrics = read_jsonl(run_dir / "metrics.jsonl")[1:]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    positions = sorted(row["position"] for row in rows)
    assert positions == list(range(len(positions))), "an admitted prompt was lost or duplicated"
    assert {row["fate"] for row in rows} <= {"trained", "pending"}  # pending: admitted for a step 5
    trained = [row for row in rows if row["fate"] == "trained"]
    assert len(trained) == 4 * 8
    for row in trained:  # steps 3 and 4 were generated by the replacement
        assert set(sum(row["weight_versions"], [])) == {row["trainer_version"]}, row["position"]
    assert (metrics[-1]["engines/restarts"], metrics[-1]["engines/live"]) == (1, 1)
    assert metrics[-1]["engines/resubmitted"] >= 1
