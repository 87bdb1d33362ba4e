"""Rollout throughput: flywheel's rollout path against bare ``vllm.LLM.generate``, alternated in one run.

    PYTHONPATH=src .venv/bin/python bench/rollout.py [--sizes tiny-adder,8M,32M,32M-long] [--repeats 3]

Flywheel's side is the path a run takes: ``start_engines`` (``VLLMEngine`` in a Ray actor behind
``RemoteEngine``), an ``EngineRouter``, and a ``RolloutStream`` that admits the step's prompts of the
``arithmetic`` task, runs each group (``run_group``: the environment's reset, one ``n``-completion
request, its grade) and scores it (``score_group``); the time runs from ``stream.start()`` to the last
group taken. As in a run, the driver's startup heap is frozen out of garbage collection while the
rounds run (``startup_heap_frozen``, which the controller's loop runs in), and so is the engine
actor's. Bare vLLM is ``vllm.LLM`` with the same engine arguments (``engines.vllm.engine_args``:
model, dtype, seed, eager mode, no chunked prefill; vLLM's defaults for the rest: KV cache, max_num_seqs,
prefix caching) and the same environment (``engine_env``: KV-cache GiB, thread binding; and in one process, its fastest CPU setting), in a child
process of the bench (so that the Ray driver holds no engine and vLLM's defaults apply as a user gets
them), timed around one ``generate`` call on the same prompt ids (the Renderer's) with the same
sampling: one ``SamplingParams(n, temperature, max_tokens, seed, logprobs=0)`` per prompt, the stream's
seed of each group. Both engines stay loaded; only one generates at a time: bare, flywheel, bare,
flywheel... each round on the next prompts of the stream (no prefix-cache hits across rounds), after
one warm-up round each. tokens/s = generated tokens / seconds; the ratio is flywheel/bare of the same
round, and a size's ratio is the median over rounds.

Models: the shipped ``assets/tiny-adder`` (quickstart workload) and random Qwen2 models of about 8M and
32M parameters (vocab 8192, head_dim 64, the tests' ASCII tokenizer). Writes each size's row into
bench/results/rollout.json (with its command, date, machine and load; other sizes' rows are kept) for
bench/rollout.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from machine import machine

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VOCAB = 8192
#: name -> (hidden, layers, heads, kv heads, intermediate); head_dim 64
SHAPES = {"8M": (256, 4, 4, 2, 1024), "32M": (512, 6, 8, 4, 2048)}
#: size -> (model, prompts, completions per prompt, max tokens)
SIZES = {
    "tiny-adder": ("tiny-adder", 64, 8, 8),
    "8M": ("8M", 64, 8, 64),
    "32M": ("32M", 64, 8, 64),
    "32M-long": ("32M", 16, 8, 128),
}


def save_model(shape: str, directory: Path) -> int:
    """A random fp32 Qwen2 of ``shape`` with the tests' ASCII tokenizer in ``directory``; its parameter count."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sys.path.insert(0, str(REPO / "tests/integration"))
    from tiny_models import ascii_tokenizer

    hidden, layers, heads, kv_heads, intermediate = SHAPES[shape]
    tokenizer = ascii_tokenizer()
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=hidden // heads, max_position_embeddings=1024, tie_word_embeddings=False,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def make_config(model: str, prompts: int, n: int, max_tokens: int):
    from flywheel.config import load_config

    overrides = [f"model.path={model}", f"rollout.prompts_per_step={prompts}", f"rollout.group_size={n}", f"rollout.max_new_tokens={max_tokens}"]
    return load_config(REPO / "configs/quickstart.yaml", overrides + ["rollout.max_staleness=0"])


def round_requests(config, tokenizer, tasks, first: int) -> list[tuple[list[int], int]]:
    """(prompt ids, seed) of the groups at stream positions first..first+prompts, as run_group builds them."""
    from flywheel.envs.episode import Renderer
    from flywheel.rollout.stream import group_seed, prompt_indices

    count, seed = config.rollout.prompts_per_step, config.run.seed
    env = tasks.env_factory()
    renderer = Renderer(tokenizer, env.system_prompt, env.tools)
    indices = prompt_indices(len(tasks.train), first, count, seed)
    return [(renderer.prompt(env.reset(tasks.train[i]))[0], group_seed(seed, first + k)) for k, i in enumerate(indices)]


def engine_settings(vllm_config) -> dict:
    """The resolved settings of an engine that shape its throughput, to show that both sides match."""
    scheduler, cache, model = vllm_config.scheduler_config, vllm_config.cache_config, vllm_config.model_config
    return {
        "dtype": str(model.dtype), "max_model_len": model.max_model_len, "max_num_seqs": scheduler.max_num_seqs,
        "max_num_batched_tokens": scheduler.max_num_batched_tokens, "chunked_prefill": scheduler.enable_chunked_prefill,
        "prefix_caching": cache.enable_prefix_caching, "kv_cache_blocks": cache.num_gpu_blocks, "block_size": cache.block_size,
        "seed": model.seed, "enforce_eager": model.enforce_eager, "threads_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND"),
        "kv_cache_gib": os.environ.get("VLLM_CPU_KVCACHE_SPACE"),
    }  # fmt: skip


def bare_worker(config, pipe) -> None:
    """Child process: ``vllm.LLM`` as flywheel's engine is configured; answers each list of (prompt ids,
    seed) with (seconds of one generate call, generated token ids per completion)."""
    from flywheel.cluster.workers import engine_spec
    from flywheel.engines.vllm import cpu_list, engine_args, engine_env, on_cpu

    cpu = on_cpu()
    os.environ.update(engine_env(config.engine, cpu))
    # bare vLLM at its fastest on CPU: scheduler and model in this process (its default spawns a worker process
    # for the model; 44-57% fewer tokens/s here, bench/rollout.md)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if cpu and config.engine.cpu_bind != "auto":
        os.sched_setaffinity(0, cpu_list(config.engine.cpu_bind))
    from vllm import LLM, SamplingParams, TokensPrompt

    llm = LLM(**engine_args(engine_spec(config), cpu))
    r = config.rollout
    pipe.send(engine_settings(llm.llm_engine.vllm_config))
    while (requests := pipe.recv()) is not None:
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids, _ in requests]
        params = [SamplingParams(n=r.group_size, temperature=r.temperature, max_tokens=r.max_new_tokens, logprobs=0, seed=s) for _, s in requests]
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        pipe.send((seconds, [[list(c.token_ids) for c in o.outputs] for o in outputs]))
    del llm


async def flywheel_round(router, tokenizer, tasks, config, algorithm, first: int) -> tuple[float, list[list[list[int]]]]:
    """One step's groups through a RolloutStream starting at stream position ``first``: (seconds, token ids per completion)."""
    from flywheel.rollout.stream import RolloutStream

    stream = RolloutStream(router, tokenizer, tasks, config, {"accepted": 0, "next_position": first, "pending": []}, algorithm, None)
    start = time.perf_counter()
    stream.start()
    groups = [await stream.next_group() for _ in range(config.rollout.prompts_per_step)]
    seconds = time.perf_counter() - start
    await stream.stop()
    groups.sort(key=lambda g: g.position)
    return seconds, [[e.completion.token_ids for e in g.episodes] for g in groups]


def bench_size(size: str, repeats: int, tmp: Path) -> dict:
    import ray
    from transformers import AutoTokenizer

    from flywheel.algorithms import make_algorithm
    from flywheel.cluster.workers import engine_group, start_engines
    from flywheel.engines.heap import startup_heap_frozen
    from flywheel.rollout.router import EngineRouter
    from flywheel.rollout.stream import load_tasks

    model, prompts, n, max_tokens = SIZES[size]
    path = REPO / "assets/tiny-adder" if model == "tiny-adder" else tmp / model
    params = None
    if model != "tiny-adder" and not path.exists():
        params = save_model(model, path)
    config = make_config(str(path), prompts, n, max_tokens)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks, algorithm = load_tasks(config), make_algorithm(config.algorithm)

    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    bare = context.Process(target=bare_worker, args=(config, theirs))  # not a daemon: vLLM starts its engine core as a child
    bare.start()
    theirs.close()  # so that a child that dies ends recv() with EOFError
    bare_settings = ours.recv()
    [engine] = start_engines(engine_group(config))
    router = EngineRouter([engine])
    flywheel_settings = ray.get(engine.actor.__ray_call__.remote(lambda actor: engine_settings(actor.llm.vllm_config)))
    print(json.dumps({"bare": bare_settings, "flywheel": flywheel_settings}), flush=True)

    def bare_round(first: int) -> tuple[float, list]:
        ours.send(round_requests(config, tokenizer, tasks, first))
        return ours.recv()

    rounds = []
    try:
        with startup_heap_frozen():  # as the controller's run loop
            for r in range(repeats + 1):  # round 0: warm-up, not counted
                first = (r + 1000) * prompts
                bare_s, bare_tokens = bare_round(first)
                fly_s, fly_tokens = asyncio.run(flywheel_round(router, tokenizer, tasks, config, algorithm, first))
                bare_count = sum(len(t) for group in bare_tokens for t in group)
                fly_count = sum(len(t) for group in fly_tokens for t in group)
                same = sum(a == b for ga, gb in zip(bare_tokens, fly_tokens) for a, b in zip(ga, gb)) / (prompts * n)
                row = {"bare_s": bare_s, "flywheel_s": fly_s, "bare_tokens": bare_count, "flywheel_tokens": fly_count, "same_completions": same}
                row |= {"bare_tokens_per_s": bare_count / bare_s, "flywheel_tokens_per_s": fly_count / fly_s}
                row["ratio"] = row["flywheel_tokens_per_s"] / row["bare_tokens_per_s"]
                print(json.dumps({"size": size, "round": r, **row}), flush=True)
                if r:
                    rounds.append(row)
    finally:
        ours.send(None)
        bare.join(60)
        engine.shutdown()
    median = {k: statistics.median(x[k] for x in rounds) for k in ("bare_tokens_per_s", "flywheel_tokens_per_s", "ratio", "same_completions")}
    settings = {"bare": bare_settings, "flywheel": flywheel_settings}
    return {
        "size": size,
        "parameters": params,
        "workload": f"{prompts} x {n} x {max_tokens}",
        **median,
        "repeats": repeats,
        "settings": settings,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated keys of SIZES")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results/rollout.json"))
    args = parser.parse_args()
    started = time.time()
    run = {
        "command": f"PYTHONPATH=src .venv/bin/python bench/rollout.py --sizes {args.sizes} --repeats {args.repeats}",
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        "machine": machine(),
    }
    out = Path(args.out)
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="rollout-bench-") as tmp:
        for size in args.sizes.split(","):  # the file is written after each size: a stopped run keeps what it measured
            row = {**run, "load_average_before": os.getloadavg()[0]} | bench_size(size, args.repeats, Path(tmp))
            write(row, out)
    import ray

    ray.shutdown()
    print(json.dumps({"minutes": round((time.time() - started) / 60, 1), "worst_ratio": json.loads(out.read_text())["worst_ratio"]}), flush=True)


def write(row: dict, out: Path) -> None:
    """``row`` into ``out`` in the place of its size's earlier row, keeping the other sizes' rows (each
    names the command, date, machine and load that produced it)."""
    kept = [r for r in json.loads(out.read_text())["results"] if r["size"] != row["size"]] if out.is_file() else []
    rows = sorted([*kept, row], key=lambda r: list(SIZES).index(r["size"]))
    out.write_text(json.dumps({"worst_ratio": min(r["ratio"] for r in rows), "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
