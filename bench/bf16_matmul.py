"""bf16 against fp32 for the three matmuls of a linear layer's training step, on this machine's CPU.

    .venv/bin/python bench/bf16_matmul.py [--tokens 512] [--repeats 5]

A linear layer y = x W^T (x: tokens x d_in, W: d_out x d_in) costs three matmuls a step: the forward
``x @ W.T``, the input's gradient ``g @ W`` and the weight's gradient ``g.T @ x``, each 2 * tokens * d_in *
d_out FLOP. They are timed for the layer shapes of the trainer's models (a 30M Qwen2's attention and MLP
projections and a 0.5B Qwen2's MLP) in float32 and bfloat16 with every core of the machine, best of
``repeats`` after one warm-up (of 2 where the warm-up took over a second). On a CPU with bf16 matrix instructions (AVX-512
bf16, AMX) torch hands bf16 to oneDNN; without them (``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` is
False) it runs its own bf16 kernels, whose speed depends on the operands' layout. The baseline of each row is
the same matmul in float32. Writes bench/results/bf16_matmul.json and bench/bf16_matmul.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from machine import describe, machine

HERE = Path(__file__).resolve().parent
SHAPES = {  # (d_in, d_out) of a layer
    "30M attention (512 -> 512)": (512, 512),
    "30M MLP up (512 -> 1408)": (512, 1408),
    "0.5B MLP down (4864 -> 896)": (4864, 896),
}


def best_seconds(run, repeats: int) -> float:
    start = time.perf_counter()
    run()
    if time.perf_counter() - start > 1.0:
        repeats = min(repeats, 2)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def layer_times(tokens: int, d_in: int, d_out: int, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    """Seconds of the forward, input-gradient and weight-gradient matmuls of one layer."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, d_in, generator=generator).to(dtype)
    w = torch.randn(d_out, d_in, generator=generator).to(dtype)
    g = torch.randn(tokens, d_out, generator=generator).to(dtype)
    return {
        "forward": best_seconds(lambda: x @ w.T, repeats),
        "input_grad": best_seconds(lambda: g @ w, repeats),
        "weight_grad": best_seconds(lambda: g.T @ x, repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    rows = []
    for name, (d_in, d_out) in SHAPES.items():
        fp32 = layer_times(args.tokens, d_in, d_out, torch.float32, args.repeats)
        bf16 = layer_times(args.tokens, d_in, d_out, torch.bfloat16, args.repeats)
        flop = 2 * args.tokens * d_in * d_out
        for matmul in fp32:
            rows.append(
                {
                    "layer": name,
                    "matmul": matmul,
                    "fp32_s": fp32[matmul],
                    "bf16_s": bf16[matmul],
                    "bf16_over_fp32": bf16[matmul] / fp32[matmul],
                    "fp32_gflops": flop / fp32[matmul] / 1e9,
                    "bf16_gflops": flop / bf16[matmul] / 1e9,
                }
            )
            print(
                f"{name:36s} {matmul:12s} fp32 {fp32[matmul] * 1e3:9.1f} ms  bf16 {bf16[matmul] * 1e3:9.1f} ms  x{rows[-1]['bf16_over_fp32']:.1f}",
                flush=True,
            )
    result = {
        "machine": machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "onednn_bf16": torch.ops.mkldnn._is_mkldnn_bf16_supported(),
        "tokens": args.tokens,
        "load_average": os.getloadavg()[0],
        "command": f".venv/bin/python bench/bf16_matmul.py --tokens {args.tokens} --repeats {args.repeats}",
        "rows": rows,
    }
    (HERE / "results/bf16_matmul.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# bf16 against fp32 for a linear layer's three matmuls",
        "",
        f"Produced by `{result['command']}` on a {describe(result['machine'])}, torch {result['torch']}, {result['threads']} threads, "
        f"{args.tokens} tokens, load average {result['load_average']:.2f}; torch hands bf16 to oneDNN: {result['onednn_bf16']}. Best of {args.repeats} (of 2 where one run took over a second); the baseline of each row "
        "is the same matmul in float32 (`bench/bf16_matmul.py` says what each matmul is).",
        "",
        "| layer | matmul | fp32 ms | bf16 ms | bf16 / fp32 | fp32 GFLOP/s | bf16 GFLOP/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {r['layer']} | {r['matmul']} | {r['fp32_s'] * 1e3:.1f} | {r['bf16_s'] * 1e3:.1f} | {r['bf16_over_fp32']:.1f} | "
            f"{r['fp32_gflops']:.1f} | {r['bf16_gflops']:.1f} |"
            for r in rows
        ),
        "",
    ]
    (HERE / "bf16_matmul.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
