"""The control plane at cluster scale: the groups and episodes per second one flywheel driver sustains, what
saturates first, and at what cluster size.

    .venv/bin/python bench/control_plane.py [--replicas 8,64,512,4096] [--workers 0,2] [--steps 6] [--skip 2]
        [--prompts 256] [--group-size 16] [--tokens 1024] [--train-s 0.0]

The real controller (``controller.train``), rollout stream, router and rollout workers run a GRPO workload (``--prompts``
prompts a step, groups of ``--group-size``, completions of ``--tokens`` tokens, max_staleness 1) against stand-ins,
which exist only in this bench:

- engine replicas: R clients (``RemoteEngine``), each a replica of its own to the router, served by ``SERVERS`` Ray
  actors (``StandInEngines``; replicas share processes). A request is answered after the profile's time for the
  completion scaled down by ``--time-scale`` (so that the engines are never what binds), with completions of exactly
  ``--tokens`` tokens: token ids, logprobs, text and weight versions, every byte a driver and its workers handle;
- the trainer: a Ray actor that receives each step's batch (it crosses Ray as a real one does) and takes ``--train-s``
  seconds; a published version is a number the replicas "load" at once.

What is measured, over the steps after ``--skip``: groups and episodes trained per second, the driver process's CPU
time per group (psutil: its own threads, Ray's core worker included), its hottest functions (cProfile, in a run of
their own at the most replicas: the profiler slows the driver), the seconds from a trained group's admission to the
start of its training step (``rollout/group_age_s``; add the train call for admission to trained) and the staleness
of the trained tokens. The number of replicas changes the router's work (a heap: O(log R) a pick) and the weight
loads (one call a replica a step); groups a step stay fixed, so rows compare.

The profile (PROFILES): output tokens per second of one GPU generating at its throughput-optimal batch, from published
vLLM measurements (source in each entry). The report turns the driver's sustained episodes per second into the
largest cluster one driver keeps fed: N GPUs generating ``tok/s`` each make N x tok/s / tokens episodes per second
(an upper bound: in a run some GPUs train). Writes bench/results/control_plane.json and bench/control_plane.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import ray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from control_plane_standins import StandInEngines, StandInTrainer  # noqa: E402
from machine import machine  # noqa: E402

from flywheel.cluster.workers import Workers  # noqa: E402
from flywheel.config import load_config  # noqa: E402
from flywheel.controller import train  # noqa: E402
from flywheel.engines.remote import RemoteEngine  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SERVERS = 2  # Ray actors serving every stand-in replica

#: one GPU generating at its throughput-optimal batch: output tokens per second, and where the number comes from
PROFILES = {
    "7B on H100": (
        12_500,
        "Llama 3.1 8B BF16 on 1x H100 80GB with vLLM (FlashInfer, 0.8 GPU memory): ~12,500 output tok/s, as collected "
        "on morphllm.com/vllm-benchmarks (2026, third-party runs)",
    ),
    "70B on H100": (460, "Llama 3.1 70B FP8 on 1x H100 80GB with vLLM, batch 64: 460 output tok/s, same collection"),
    "7B on H200": (12_500 * 4.8 / 3.35, "the H100 figure scaled by memory bandwidth (4.8 vs 3.35 TB/s): decode is bandwidth-bound"),
    "70B on H200": (460 * 4.8 / 3.35, "the H100 figure scaled by memory bandwidth (4.8 vs 3.35 TB/s)"),
}
CLUSTERS = (1_000, 4_096, 10_000)


def long_context_model(directory: Path, tokens: int) -> Path:
    """assets/tiny-adder with a context that holds a prompt and ``tokens`` more (its tokenizer and config only are read)."""
    path = directory / "tiny-adder-long"
    shutil.copytree(REPO / "assets/tiny-adder", path)
    for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        data = json.loads((path / name).read_text())
        data[key] = tokens + 256
        (path / name).write_text(json.dumps(data, indent=2))
    return path


def run(replicas: int, workers: int, args: argparse.Namespace, model: Path, out: Path, profile: bool = False) -> dict:
    """One run; with ``profile``, the driver's measured steps run under cProfile (slower: its rates are not reported)."""
    overrides = [
        f"model.path={model}",
        f"rollout.prompts_per_step={args.prompts}",
        f"rollout.group_size={args.group_size}",
        f"rollout.max_new_tokens={args.tokens}",
        f"rollout.engines={replicas}",
        f"rollout.workers={workers}",
        "rollout.max_staleness=1",
        "algorithm.off_policy=tis",
        f"run.steps={args.steps}",
        "run.progress=false",
        "run.dump_rollouts=false",
        "run.checkpoint_every=100000",
        "monitor.dump_every=0",
        "monitor.timeline=false",
        "eval.every=100000",
        "eval.greedy=false",
        "task.eval_size=4",
        f"run.output_dir={out}",
    ]
    config = load_config(REPO / "configs/quickstart.yaml", overrides)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE), str(REPO / "src"), os.environ.get("PYTHONPATH")])
    )  # the stand-ins, by reference
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="error")
    try:
        from transformers import AutoTokenizer

        vocab = len(AutoTokenizer.from_pretrained(model))
        latency = args.tokens / PROFILES[args.profile][0] * args.batch / args.time_scale  # a request's share of a batch
        server = ray.remote(StandInEngines).options(num_cpus=0, max_concurrency=100_000)
        servers = [server.remote(vocab, latency, seed) for seed in range(SERVERS)]
        ray.get([s.__ray_ready__.remote() for s in servers])
        engines = [RemoteEngine(servers[i % SERVERS]) for i in range(replicas)]
        trainer = StandInTrainer(args.train_s)
        process, marks, profiler = psutil.Process(), {}, cProfile.Profile()

        def on_step(row: dict) -> None:  # called by the run's metrics writer, on the driver's loop
            if row.get("step") == args.skip:
                marks["start"] = (time.perf_counter(), sum(process.cpu_times()[:2]))
                if profile:
                    profiler.enable()
            if row.get("step") == args.steps:
                profiler.disable()
                marks["end"] = (time.perf_counter(), sum(process.cpu_times()[:2]))

        hooks.append(on_step)
        try:
            run_dir = train(config, Workers(engines, trainer))
        finally:
            hooks.remove(on_step)
            trainer.shutdown()
    finally:
        ray.shutdown()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    measured = [r for r in rows if args.skip < r["step"] <= args.steps]
    (t0, c0), (t1, c1) = marks["start"], marks["end"]
    groups = args.prompts * len(measured)
    if profile:
        stats = pstats.Stats(profiler, stream=io.StringIO())
        hottest = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:8]  # by own time
        return {
            "hottest": [
                {
                    "function": f"{Path(file).name}:{line}({name})",
                    "own_s_per_group": round(own / groups, 6),
                    "calls_per_group": round(calls / groups, 2),
                }
                for (file, line, name), (_, calls, own, _, _) in hottest
            ]
        }
    return {
        "replicas": replicas,
        "workers": workers,
        "steps_measured": len(measured),
        "groups_per_s": round(groups / (t1 - t0), 2),
        "episodes_per_s": round(groups * args.group_size / (t1 - t0), 1),
        "tokens_per_s": round(groups * args.group_size * args.tokens / (t1 - t0)),
        "driver_cpu_share": round((c1 - c0) / (t1 - t0), 3),
        "driver_cpu_ms_per_group": round(1000 * (c1 - c0) / groups, 3),
        "median_step_s": round(statistics.median(r["timing/step_s"] for r in measured), 3),
        "median_wait_for_batch_s": round(statistics.median(r["timing/wait_for_batch_s"] for r in measured), 3),
        "median_train_s": round(statistics.median(r["timing/train_s"] for r in measured), 3),
        "group_age_s_mean": round(statistics.mean(r["rollout/group_age_s_mean"] for r in measured), 3),
        "group_age_s_max": round(max(r["rollout/group_age_s_max"] for r in measured), 3),
        "staleness_mean": round(statistics.mean(r["rollout/staleness_mean"] for r in measured), 3),
        "staleness_max": max(r["rollout/staleness_max"] for r in measured),
    }


#: the driver's hooks on each logged row (installed on Trackers.log for this bench)
hooks: list = []


def install_hooks() -> None:
    from flywheel.monitor.trackers import Trackers

    log = Trackers.log

    def logged(self, row, step):
        log(self, row, step)
        for hook in list(hooks):
            hook(row)

    Trackers.log = logged


def report(result: dict) -> str:
    a = result["settings"]
    lines = [
        "# The control plane at cluster scale",
        "",
        f"`bench/control_plane.py` ({result['date']}, {result['machine']['cores']}-core {result['machine']['cpu']}, "
        f"{result['machine']['memory_gib']} GiB). Produced by:",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        f"GRPO, {a['prompts']} prompts a step, groups of {a['group_size']}, completions of {a['tokens']} tokens, max_staleness 1; "
        f"stand-in engines answering after the {a['profile']} profile's time scaled down {a['time_scale']:g}x, a stand-in trainer "
        f"taking {a['train_s']:g} s a step (its batch crosses Ray). Rates over the steps after the first {a['skip']}.",
        "",
        "| replicas | workers | groups/s | episodes/s | tokens/s | driver CPU share | driver ms / group | step s | waiting for the batch, s | "
        "train call, s | admission to training, s mean / max | staleness mean / max |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['replicas']} | {r['workers']} | {r['groups_per_s']:.1f} | {r['episodes_per_s']:.0f} | {r['tokens_per_s']:,} | "
            f"{r['driver_cpu_share']:.2f} | {r['driver_cpu_ms_per_group']:.2f} | {r['median_step_s']:.2f} | {r['median_wait_for_batch_s']:.2f} | "
            f"{r['median_train_s']:.2f} | {r['group_age_s_mean']:.2f} / {r['group_age_s_max']:.2f} | {r['staleness_mean']:.2f} / {r['staleness_max']:.0f} |"
        )
    lines += ["", "The driver's hottest functions (own CPU per group, cProfile, in another run of the same setting), at the most replicas:", ""]
    for workers in sorted({r["workers"] for r in result["runs"]}):
        r = max((r for r in result["runs"] if r["workers"] == workers), key=lambda r: r["replicas"])
        lines.append(
            f"- {r['replicas']} replicas, {workers} workers: "
            + "; ".join(f"`{re.sub(r' at 0x[0-9a-f]+', '', h['function'])}` {1000 * h['own_s_per_group']:.3f} ms" for h in r["hottest"][:5])
        )
    best = max(result["runs"], key=lambda r: r["episodes_per_s"])
    most = max(r["replicas"] for r in result["runs"])
    at_most = max((r for r in result["runs"] if r["replicas"] == most), key=lambda r: r["episodes_per_s"])
    lines += [
        "",
        f"What one driver keeps fed: its best sustained rate here ({best['episodes_per_s']:.0f} episodes/s, {best['replicas']} replicas, "
        f"{best['workers']} workers) and its rate at {most} replicas ({at_most['episodes_per_s']:.0f} episodes/s), against the episodes/s "
        f"N GPUs generate at {a['tokens']}-token completions (N x tok/s / {a['tokens']}):",
        "",
        "| profile | tok/s per GPU | episodes/s per GPU | "
        + " | ".join(f"needed at {n:,} GPUs" for n in CLUSTERS)
        + f" | GPUs one driver feeds (best rate) | GPUs one driver feeds ({most} replicas) |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in CLUSTERS) + " | ---: | ---: |",
    ]
    for name, (rate, _) in PROFILES.items():
        per_gpu = rate / a["tokens"]
        needed = " | ".join(f"{n * per_gpu:,.0f}" for n in CLUSTERS)
        lines.append(
            f"| {name} | {rate:,.0f} | {per_gpu:.2f} | {needed} | {best['episodes_per_s'] / per_gpu:,.0f} | {at_most['episodes_per_s'] / per_gpu:,.0f} |"
        )
    lines += ["", "Sources of the profiles:", ""] + [f"- {name}: {source}" for name, (_, source) in PROFILES.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="8,64,512,4096")
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--train-s", type=float, default=0.0)
    parser.add_argument("--profile", default="7B on H100", choices=list(PROFILES))
    parser.add_argument("--batch", type=int, default=256, help="sequences a replica generates at once (its request's share of the GPU)")
    parser.add_argument("--time-scale", type=float, default=1000.0, help="the engines answer this many times faster than the profile")
    parser.add_argument("--report", action="store_true", help="rewrite bench/control_plane.md from the results file, running nothing")
    args = parser.parse_args()
    if args.report:
        (HERE / "control_plane.md").write_text(report(json.loads((HERE / "results/control_plane.json").read_text())))
        return
    install_hooks()
    runs = []
    with tempfile.TemporaryDirectory(prefix="control-plane-") as tmp:
        model = long_context_model(Path(tmp), args.tokens)
        for replicas in (int(r) for r in args.replicas.split(",")):
            for workers in (int(w) for w in args.workers.split(",")):
                runs.append(run(replicas, workers, args, model, Path(tmp) / f"{replicas}-{workers}"))
                print(json.dumps(runs[-1]), flush=True)
        most = max(r["replicas"] for r in runs)
        for row in [r for r in runs if r["replicas"] == most]:  # where the driver's time goes, in a run of its own
            row |= run(most, row["workers"], args, model, Path(tmp) / f"{most}-{row['workers']}-profiled", profile=True)
    result = {
        "command": " ".join([".venv/bin/python bench/control_plane.py", *sys.argv[1:]]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "settings": {k: getattr(args, k) for k in ("prompts", "group_size", "tokens", "train_s", "profile", "batch", "time_scale", "skip", "steps")},
        "load_average": os.getloadavg()[0],
        "runs": runs,
    }
    (HERE / "results/control_plane.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "control_plane.md").write_text(report(result))


if __name__ == "__main__":
    main()
