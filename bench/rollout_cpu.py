"""CPU time of the rollout path per step, by process: the Ray driver (the controller's side: stream,
groups, environments, scoring), the engine actor (vLLM's front end) and its engine core.

    PYTHONPATH=src .venv/bin/python bench/rollout_cpu.py [--size tiny-adder] [--rounds 6] [--profile]

Wall-clock tokens/s is noisy on a shared machine; CPU seconds of a fixed workload are not (much): run
it alternately with the old and the new ``src`` on PYTHONPATH (the engine actor inherits it) and
compare. Each round is one step's groups through a ``RolloutStream`` (bench/rollout.py's flywheel side)
on fresh stream positions; round 0 is a warm-up. Prints one JSON line per round (CPU seconds of each
process, generated tokens, a digest of every completion's tokens to compare code versions) and the
medians; ``--profile`` adds the driver's and the actor's functions by own CPU time over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from rollout import REPO, SIZES, flywheel_round, make_config  # noqa: E402

#: per round: CPU seconds of the driver process (all threads), of its event-loop thread alone, of the
#: engine actor's process, of vLLM's engine core and worker processes; wall seconds
KEYS = ("driver_cpu_s", "driver_loop_cpu_s", "actor_cpu_s", "core_cpu_s", "wall_s")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (vLLM's engine core and what it starts)."""
    kids = [int(c) for t in os.listdir(f"/proc/{pid}/task") for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    return kids + [d for k in kids for d in descendants(k)]


def _profile_actor(actor, on: bool):
    """Starts (or stops and returns the text of) a cProfile of the engine actor's event-loop thread."""

    def toggle(engine):  # runs on the loop where vLLM's front end runs (that of its output handler)
        def switch() -> str:
            if on:
                engine._bench_profile = cProfile.Profile()
                engine._bench_profile.enable()
                return ""
            engine._bench_profile.disable()
            out = io.StringIO()
            pstats.Stats(engine._bench_profile, stream=out).sort_stats("tottime").print_stats(30)
            return out.getvalue()

        async def call() -> str:
            return switch()

        return asyncio.run_coroutine_threadsafe(call(), engine.llm.output_handler.get_loop()).result()

    return actor.__ray_call__.remote(toggle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny-adder", choices=["tiny-adder"])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    import ray
    from transformers import AutoTokenizer

    import flywheel
    from flywheel.algorithms import make_algorithm
    from flywheel.cluster.workers import engine_group, start_engines
    from flywheel.rollout.router import EngineRouter
    from flywheel.rollout.stream import load_tasks

    _, prompts, n, max_tokens = SIZES[args.size]
    config = make_config(str(REPO / "assets/tiny-adder"), prompts, n, max_tokens)
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks, algorithm = load_tasks(config), make_algorithm(config.algorithm)
    [engine] = start_engines(engine_group(config))
    router = EngineRouter([engine])
    actor_pid, actor_src = ray.get(engine.actor.__ray_call__.remote(lambda _: (os.getpid(), sys.modules["flywheel"].__file__)))
    core = descendants(actor_pid)
    names = [Path(f"/proc/{p}/comm").read_text().strip() for p in core]
    print(json.dumps({"driver_src": flywheel.__file__, "actor_src": actor_src, "engine_processes": names}), flush=True)
    driver_profile = cProfile.Profile()
    rows = []
    try:
        for r in range(args.rounds + 1):
            if args.profile and r == 1:
                ray.get(_profile_actor(engine.actor, True))
                driver_profile.enable()
            before = time.process_time(), time.thread_time(), process_cpu_s(actor_pid), sum(map(process_cpu_s, core)), time.perf_counter()
            seconds, tokens = asyncio.run(flywheel_round(router, tokenizer, tasks, config, algorithm, (r + 2000) * prompts))
            after = time.process_time(), time.thread_time(), process_cpu_s(actor_pid), sum(map(process_cpu_s, core)), time.perf_counter()
            row = {"round": r, **{k: round(a - b, 4) for k, a, b in zip(KEYS, after, before)}, "tokens": sum(len(t) for g in tokens for t in g)}
            row["digest"] = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]
            print(json.dumps(row), flush=True)
            if r:
                rows.append(row)
        if args.profile:
            driver_profile.disable()
            actor_text = ray.get(_profile_actor(engine.actor, False))
            out = io.StringIO()
            pstats.Stats(driver_profile, stream=out).sort_stats("tottime").print_stats(25)
            print("DRIVER PROFILE\n" + out.getvalue() + "\nACTOR PROFILE\n" + actor_text, flush=True)
    finally:
        engine.shutdown()
        ray.shutdown()
    print(json.dumps({"median": {k: round(statistics.median(x[k] for x in rows), 4) for k in KEYS}, "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
