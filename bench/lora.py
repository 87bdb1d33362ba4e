"""LoRA vs full fine-tuning: trainable parameters, optimiser state, peak memory, weight-sync size, merge time.

    PYTHONPATH=src .venv/bin/python bench/lora.py

For each model (a random ~34M-parameter Qwen2, hidden 512, 8 layers, vocab 8192; the shipped
assets/tiny-adder) and each case (full fine-tuning, LoRA rank 8, LoRA rank 16; alpha = 2·rank, the
attention and MLP projections), a fresh subprocess builds the model (fp32), wraps it, makes AdamW over
the trainable parameters and runs two training steps (forward, backward, step) on a random [B, T] batch
(B = 1 and 8, a fresh process each; T = 128, 64 for tiny-adder),
then reports: trainable parameters, bytes of parameters, gradients and optimiser state (summed tensor
bytes), the resident memory of the built model (RSS after building minus after imports) and the peak
resident memory the two steps add on top of it (VmHWM, reset after building), and for the
weight sync: the bytes the engines receive (merged full weights, written by FileTransport) against the
adapters alone, and the time of ``merged_state_dict`` (+ publish) against the plain ``state_dict``
(+ publish), best and median of 10. Writes bench/results/lora.json (with the command) for the table of bench/lora.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODELS = {"random34m": None, "tiny-adder": REPO / "assets/tiny-adder"}
CASES = {"full": 0, "lora-r8": 8, "lora-r16": 16}
BATCHES = (1, 8)  # sequences of a training step: the peak memory is measured at each
REPEATS = 10


def status_bytes(field: str) -> int:
    """VmRSS (resident now) or VmHWM (peak resident since the last reset_peak) of this process."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM := VmRSS


def build(name: str):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    if MODELS[name] is not None:
        return AutoModelForCausalLM.from_pretrained(MODELS[name], dtype=torch.float32)
    config = Qwen2Config(
        vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
        max_position_embeddings=512, tie_word_embeddings=False, dtype="float32",
    )  # fmt: skip
    return Qwen2ForCausalLM(config)


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def seconds(call, repeats: int = REPEATS) -> dict[str, float]:
    """Best and median wall time of ``repeats`` calls (the best is the less load-sensitive one)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return {"best": round(min(times), 5), "median": round(statistics.median(times), 5)}


def run_case(model_name: str, case: str, batch: int) -> dict:
    """One case, in this (fresh) process."""
    import torch
    from safetensors.torch import save_file

    from flywheel.config import LoraConfig
    from flywheel.trainer.logprobs import token_logprobs
    from flywheel.trainer.lora import adapter_state_dict, add_adapters, merged_state_dict
    from flywheel.weights.file import FileTransport

    torch.set_num_threads(2)
    imports_rss = status_bytes("VmRSS")
    model = build(model_name)
    rank = CASES[case]
    if rank:
        model = add_adapters(model, LoraConfig(rank=rank, alpha=2.0 * rank))
    model.train()
    gc.collect()
    model_rss = status_bytes("VmRSS")
    reset_peak()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    length = min(128, model.config.max_position_embeddings)
    tokens = torch.randint(2, model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(tokens)
    for _ in range(2):
        loss = -token_logprobs(model, tokens, mask)[:, 1:].mean()
        loss.backward()
        grads = tensor_bytes(p.grad for p in trainable)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    peak_rss = status_bytes("VmHWM")
    state = optimizer.state_dict()["state"]
    result = {
        "params": sum(p.numel() for p in model.parameters()),
        "trainable_params": sum(p.numel() for p in trainable),
        "param_bytes": tensor_bytes(model.parameters()),
        "grad_bytes": grads,
        "optimizer_state_bytes": tensor_bytes(v for s in state.values() for v in s.values() if isinstance(v, torch.Tensor)),
        "model_rss_bytes": model_rss - imports_rss,
        f"training_peak_rss_bytes_b{batch}": peak_rss - model_rss,
    }
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as directory:
        transport = FileTransport(Path(directory) / "weights")
        publish = merged_state_dict if rank else (lambda m: m.state_dict())
        result["state_dict_s"] = seconds(lambda: publish(model))
        result["publish_s"] = seconds(lambda: transport.publish(publish(model), version=1))
        result["sync_bytes"] = next(transport.directory.glob("*.safetensors")).stat().st_size
        if rank:
            adapter = Path(directory) / "adapter.safetensors"
            result["adapter_s"] = seconds(lambda: save_file(adapter_state_dict(model), str(adapter)))
            result["adapter_sync_bytes"] = adapter.stat().st_size
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="model:case:batch, run in this process (what the driver starts)")
    args = parser.parse_args()
    if args.case:
        model_name, case, batch = args.case.split(":")
        print(json.dumps(run_case(model_name, case, int(batch))))
        return
    env = os.environ | {"PYTHONPATH": str(REPO / "src")}
    results: dict = {"command": "PYTHONPATH=src .venv/bin/python bench/lora.py", "load_average_before": os.getloadavg()[0], "models": {}}
    for model_name in MODELS:
        cases = {}
        for case in CASES:
            runs = []
            for batch in BATCHES:
                argv = [sys.executable, __file__, "--case", f"{model_name}:{case}:{batch}"]
                runs.append(json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]))
            cases[case] = runs[-1] | {key: value for run in runs for key, value in run.items() if key.startswith("training_peak")}
            print(model_name, case, cases[case], flush=True)
        full = cases["full"]
        for case, row in cases.items():
            keys = ("trainable_params", "grad_bytes", "optimizer_state_bytes", "model_rss_bytes", *(f"training_peak_rss_bytes_b{b}" for b in BATCHES))
            row["vs_full"] = {key: round(row[key] / full[key], 4) for key in keys}
            row["vs_full"] |= {f"{key}_best": round(row[key]["best"] / full[key]["best"], 2) for key in ("state_dict_s", "publish_s")}
            if "adapter_sync_bytes" in row:
                row["vs_full"]["adapter_sync_bytes"] = round(row["adapter_sync_bytes"] / full["sync_bytes"], 5)
        results["models"][model_name] = cases
    results["load_average_after"] = os.getloadavg()[0]
    (HERE / "results/lora.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
