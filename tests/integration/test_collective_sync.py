"""The collective weight transport on the real engine: a gloo group over TCP between this process (the
trainer's sender) and the engine's worker, which receives inside vLLM's weight-transfer session. What it
delivers equals what the file transport delivers, it lands while requests are in flight, and the
quickstart run over it reproduces the golden numbers bit for bit. (A tied model through it, from a
sharded trainer: test_model_families.py, qwen2.)"""

import asyncio
import json
import math
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.envs.arithmetic import make_splits
from flywheel.types import Completion
from flywheel.weights.collective import CollectiveTransport
from flywheel.weights.config import CollectiveTransportConfig
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
        ["run.steps=3", "eval.every=100", "eval.greedy=false", "run.progress=false", f"run.output_dir={tmp_path}", "weights.name=collective"],
    )
    rows = [json.loads(line) for line in (train(config, fresh_workers(config)) / "metrics.jsonl").read_text().splitlines()][1:]
    golden = [json.loads(line) for line in (REPO / "tests/golden/quickstart_20_steps.jsonl").read_text().splitlines()][:3]
    keys = {"loss": "loss/policy", "reward": "reward/mean", "grad_norm": "train/grad_norm", "entropy": "train/entropy"}
    assert [{"step": r["step"]} | {name: r[key] for name, key in keys.items()} for r in rows] == golden
    assert [r["weights/version"] for r in rows] == [1, 2, 3]
