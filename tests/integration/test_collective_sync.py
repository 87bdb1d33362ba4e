"""The collective weight transport on the real engine: a gloo group over TCP between this process (the
trainer's sender) and the engine's worker, which receives inside vLLM's weight-transfer session. What it
delivers equals what the file transport delivers, it lands while requests are in flight, and the
quickstart run over it reproduces the golden numbers bit for bit. (A tied model through it, from a
sharded trainer: test_model_families.py, qwen2.)"""

import asyncio
import dataclasses
import json
import math
import time
from pathlib import Path

import pytest
import ray
import torch
from helpers import SYNC, assert_matches_golden, crashing_engine
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.cluster.workers import Workers, engine_group, engine_spec, engine_starter, start_trainer, trainer_spec
from flywheel.config import load_config
from flywheel.config.weights import CollectiveTransportConfig
from flywheel.controller import train
from flywheel.engines.remote import RemoteEngine
from flywheel.envs.arithmetic import make_splits
from flywheel.types import Completion
from flywheel.weights.collective import CollectiveTransport
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def greedy(engine, prompts: list[list[int]]) -> list[Completion]:
    return [group[0] for group in asyncio.run(engine.generate(prompts, 1, 0.0, 8, 0))]


def test_collective_delivers_what_the_file_transport_does_and_lands_in_flight(shared_engine, config, tmp_path):
    model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    original = model.state_dict()
    torch.manual_seed(0)
    moved = {name: tensor + 0.05 * torch.randn_like(tensor) for name, tensor in original.items()}
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0]]
    old = greedy(shared_engine, prompts[:1])[0].weight_version  # earlier tests moved it
    by_file = FileTransport(tmp_path / "weights")
    collective = CollectiveTransport(CollectiveTransportConfig(bucket_mb=0.25), engines=1)  # a 4 MB model: several buckets
    try:
        asyncio.run(shared_engine.load_weights(by_file.publish(moved, old + 1)))
        from_file = greedy(shared_engine, prompts[:16])
        asyncio.run(shared_engine.load_weights(by_file.publish(original, old + 2)))
        assert [c.token_ids for c in greedy(shared_engine, prompts[:16])] != [c.token_ids for c in from_file]  # the weights matter

        asyncio.run(shared_engine.load_weights(collective.publish(moved, old + 3)))
        collective.wait()
        from_collective = greedy(shared_engine, prompts[:16])
        assert [c.token_ids for c in from_collective] == [c.token_ids for c in from_file]
        gap = max(abs(a - b) for f, c in zip(from_file, from_collective) for a, b in zip(f.logprobs, c.logprobs))
        assert gap < 1e-6, gap
        assert {v for c in from_collective for v in c.weight_versions} == {old + 3}

        # In flight: an lm_head of zeros makes every token sampled after the update exactly -log(vocab).
        uniform = {name: torch.zeros_like(t) if name == "lm_head.weight" else t for name, t in original.items()}

        async def generate_and_update():
            generating = asyncio.create_task(shared_engine.generate(prompts, 8, 1.0, 8, 0))
            await asyncio.sleep(1.0)  # requests join and leave the running batch continuously: some are mid-way
            await shared_engine.load_weights(collective.publish(uniform, old + 4))
            return await generating

        completions = [c for group in asyncio.run(generate_and_update()) for c in group]
        assert any(set(c.weight_versions) == {old + 3, old + 4} for c in completions), "no completion spans the update"
        new = [lp for c in completions for v, lp in zip(c.weight_versions, c.logprobs) if v == old + 4]
        assert new and all(abs(lp + math.log(model.config.vocab_size)) < 1e-4 for lp in new)
    finally:
        asyncio.run(shared_engine.load_weights(by_file.publish(original, old + 5)))  # later tests expect the shipped model
        collective.close()
        by_file.close()


def test_quickstart_over_the_collective_reproduces_the_golden_steps(fresh_workers, tmp_path):
    """The first three golden steps (test_golden.py's config) with weights.name=collective: the engine
    samples from exactly the trainer's weights."""
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [*SYNC, "run.steps=3", "eval.every=100", "eval.greedy=false", "run.progress=false", f"run.output_dir={tmp_path}", "weights.name=collective"],
    )
    rows = [json.loads(line) for line in (train(config, fresh_workers(config)) / "metrics.jsonl").read_text().splitlines()][1:]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert_matches_golden(rows)
    assert [r["weights/version"] for r in rows] == [1, 2, 3]


class Kept:
    """An engine the router cannot stop: the test asks the replacement for greedy outputs after the
    run (the router stops the replacements it started when the run ends) and stops it itself.
    ``loaded`` is set once it has loaded weights."""

    def __init__(self, engine) -> None:
        self.engine, self.requests, self.loaded = engine, 0, asyncio.Event()

    async def generate(self, *args, **kwargs):
        self.requests += 1
        return await self.engine.generate(*args, **kwargs)

    async def load_weights(self, update):
        loaded = await self.engine.load_weights(update)
        self.loaded.set()
        return loaded

    def shutdown(self) -> None:
        pass


class HeldTrainer:
    """The run's trainer group, its ``hold``-th train step held until ``ready()`` (the replacement
    loaded its weights: a replica restarts in tens of seconds on a busy machine, the run's steps take a few)."""

    def __init__(self, group, hold: int, ready) -> None:
        self.group, self.hold, self.ready, self.steps = group, hold, ready, 0

    def __getattr__(self, name):
        return getattr(self.group, name)

    async def train_step(self, *args, **kwargs):
        self.steps += 1
        if self.steps == self.hold:
            await self.ready()
        return await self.group.train_step(*args, **kwargs)


@pytest.mark.slow
def test_a_replica_that_dies_rejoins_the_collective_group_with_the_current_weights(shared_engine, fresh_workers, tmp_path):
    """Two replicas over weights.name=collective (the session's engine in slot 0, a second one in slot
    1 whose process dies mid-request once it serves version 2). The group re-forms with the live
    replica and a replacement in slot 1, which receives the current weights before it takes requests;
    the run goes on without it (synchronous, so every trained token carries its step's version; its
    fourth step is held until the replacement is in), the replacement serves requests and then the
    final version exactly as an engine that loaded it from a file does, and engines/restarts is 1. A
    send never waits for the dead member: no batch waits anywhere near weights.timeout_s."""

    steps, timeout_s = 6, 120
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.progress=false",
            f"run.steps={steps}",
            "rollout.prompts_per_step=8",
            "rollout.engines=2",
            "eval.every=100",
            "run.checkpoint_every=100",
            "run.dump_rollouts=true",
            f"run.output_dir={tmp_path}",
            "weights.name=collective",
            f"weights.timeout_s={timeout_s}",
        ],
    )
    fresh_workers(config)  # retires the session's trainer
    crashing = ray.remote(crashing_engine()).options(num_cpus=0.5, max_restarts=0).remote(dataclasses.replace(engine_spec(config), replica=1))
    trainer = start_trainer(trainer_spec(config), CollectiveTransport(config.weights, engines=2))
    ray.get(crashing.__ray_ready__.remote())
    starter, replacements = engine_starter(engine_group(config, cpus=0.5)), []

    async def replace(replica: int):
        replacements.append(Kept(await starter(replica)))
        return replacements[-1]

    async def replacement_loaded() -> None:
        while not replacements:
            await asyncio.sleep(0.5)
        await replacements[0].loaded.wait()

    by_file = FileTransport(tmp_path / "weights")
    try:
        held = HeldTrainer(trainer, 4, replacement_loaded)
        started = time.perf_counter()
        run_dir = train(config, Workers([shared_engine, RemoteEngine(crashing)], held, replace, trainer.rejoin_weights))
        run_s = time.perf_counter() - started
        [replacement] = replacements
        served_in_run = replacement.requests

        tokenizer = AutoTokenizer.from_pretrained(config.model.path)
        prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0][:16]]
        from_replacement = greedy(replacement.engine, prompts)
        final = AutoModelForCausalLM.from_pretrained(run_dir / "final", dtype=torch.float32).state_dict()
        asyncio.run(shared_engine.load_weights(by_file.publish(final, steps)))
        from_file = greedy(shared_engine, prompts)
    finally:
        ray.kill(crashing)
        trainer.shutdown()
        for engine in replacements:
            engine.engine.shutdown()
        initial = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32).state_dict()
        asyncio.run(shared_engine.load_weights(by_file.publish(initial, steps + 1)))  # later tests expect the shipped model
        by_file.close()

    rows = [json.loads(line) for line in (run_dir / "rollouts.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    assert [m["step"] for m in metrics] == list(range(1, steps + 1))
    trained = [row for row in rows if row["fate"] == "trained"]
    assert len(trained) == steps * 8
    for row in trained:
        assert set(sum(row["weight_versions"], [])) == {row["trainer_version"]}, row["position"]
    positions = sorted(row["position"] for row in rows)
    assert positions == list(range(len(positions))), "an admitted prompt was lost or duplicated"
    assert (metrics[-1]["engines/restarts"], metrics[-1]["engines/live"]) == (1, 2)
    assert metrics[-1]["engines/resubmitted"] >= 1
    assert max(m["timing/wait_for_batch_s"] for m in metrics) < timeout_s / 4
    assert served_in_run > 0
    print(f"run {run_s:.0f} s; replacement served {served_in_run} requests; steps took {[round(m['timing/step_s'], 1) for m in metrics]} s")

    assert {v for c in from_replacement for v in c.weight_versions} == {steps}
    assert [c.token_ids for c in from_replacement] == [c.token_ids for c in from_file]
    gap = max(abs(a - b) for f, c in zip(from_file, from_replacement) for a, b in zip(f.logprobs, c.logprobs))
    assert gap < 1e-5, gap
