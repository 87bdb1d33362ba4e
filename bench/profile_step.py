"""Where a quickstart step goes: the step's phases, the trainer's passes, the controller's own Python.

    .venv/bin/python bench/profile_step.py [--steps 12] [config overrides...]

One real quickstart run (configs/quickstart.yaml, synchronous, fp32; overrides after the options), with
the engines and the trainer started as ``flywheel train`` starts them, but the trainer rank is a
``TimedTrainer``: it adds up the wall time of its proximal no-grad passes, training forwards, backwards
(forward_backward less its forward), optimiser steps, weight publishing and the rest of train_step
(planning and cutting micro-batches, the step's all-reduces). The controller process (this one: the
rollout stream, environments, rewards, batch building, the Ray round trips) runs under cProfile, and its
CPU time per step is measured. Medians and sums are over the steps after ``--skip`` (warm-up).
Writes bench/results/profile_step.json and bench/profile_step.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import ray
import torch

from flywheel.cluster.workers import Workers, engine_group, replacements, start_engines, start_trainer, trainer_spec
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.metrics import read_metrics
from flywheel.trainer.trainer import Trainer
from flywheel.weights import open_transport

HERE = Path(__file__).resolve().parent


def timed_trainer() -> type[Trainer]:
    """The rank class, defined in a function so that Ray ships it by value."""

    class TimedTrainer(Trainer):
        """A rank that adds up the wall seconds of each phase of its steps."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.seconds: dict[str, list[float]] = defaultdict(list)  # phase -> seconds per step
            self._step: dict[str, float] = defaultdict(float)

        def _timed(self, phase: str, call):
            start = time.perf_counter()
            out = call()
            self._step[phase] += time.perf_counter() - start
            return out

        def _logprobs(self, model, micro, with_entropy=False):
            phase = "training forward" if torch.is_grad_enabled() else "proximal pass (no grad)"
            return self._timed(phase, lambda: super(TimedTrainer, self)._logprobs(model, micro, with_entropy))

        def forward_backward(self, micro, totals):
            before = self._step["training forward"]
            out = self._timed("backward", lambda: super(TimedTrainer, self).forward_backward(micro, totals))
            self._step["backward"] -= self._step["training forward"] - before  # the forward is counted once
            return out

        def optim_step(self):
            return self._timed("optimiser step", super().optim_step)

        def train_step(self, parts):
            start = time.perf_counter()
            metrics = super().train_step(parts)
            inside = sum(self._step.values())
            self._step["planning, cutting, all-reduces"] = time.perf_counter() - start - inside
            for phase, seconds in self._step.items():
                self.seconds[phase].append(seconds)
            self._step = defaultdict(float)
            return metrics

        def publish_weights(self):
            start = time.perf_counter()
            update = super().publish_weights()
            self.seconds["publish weights"].append(time.perf_counter() - start)
            return update

        def phase_seconds(self) -> dict[str, list[float]]:
            return dict(self.seconds)

    return TimedTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--skip", type=int, default=2, help="warm-up steps left out")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="flywheel-profile-"))
    config = load_config(
        HERE.parent / "configs/quickstart.yaml",
        [
            "rollout.max_staleness=0",
            "algorithm.off_policy=none",  # synchronous
            f"run.steps={args.steps}",
            f"eval.every={args.steps + 1}",
            f"run.checkpoint_every={args.steps + 1}",
            f"run.output_dir={out_dir}",
            "run.progress=false",
            *args.overrides,
        ],
    )
    transport = open_transport(config.weights, config.rollout.engines)
    trainer = start_trainer(trainer_spec(config), transport, timed_trainer())
    workers = Workers(start_engines(engine_group(config)), trainer, *replacements(engine_group(config), trainer))
    load_before = os.getloadavg()[0]
    profiler = cProfile.Profile()
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    profiler.enable()
    try:
        run_dir = train(config, workers)
        phases = ray.get(workers.trainer.actors[0].phase_seconds.remote())
    finally:
        profiler.disable()
        workers.shutdown()
    controller_cpu_s, run_wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["step"] > args.skip]
    median = lambda values: round(statistics.median(values), 4)  # noqa: E731
    trainer = {phase: median(seconds[args.skip :]) for phase, seconds in phases.items() if phase != "publish weights"}
    trainer["publish weights"] = median(phases["publish weights"][args.skip + 1 :])  # the first publishes the initial weights
    result = {
        "command": " ".join([".venv/bin/python bench/profile_step.py", f"--steps {args.steps}", f"--skip {args.skip}", *args.overrides]),
        "steps_measured": len(rows),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "step": {key.split("/")[1]: median([r[key] for r in rows]) for key in rows[0] if key.startswith("timing/") and key != "timing/elapsed_s"},
        "trainer_phases_s": trainer,
        "controller_cpu_s_per_step": round(controller_cpu_s / args.steps, 4),
        "controller_cpu_share_of_run": round(controller_cpu_s / run_wall_s, 3),
        "controller_top": top_functions(profiler, args.steps),
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/profile_step.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "profile_step.md").write_text(report(result))
    print(json.dumps(result, indent=2))


#: functions in which the controller waits rather than works
IDLE = ("poll", "select", "sleep", "wait", "acquire", "_run_once")


def top_functions(profiler: cProfile.Profile, steps: int, count: int = 15) -> list[dict]:
    """The controller's functions by own CPU time per step, waiting left out."""
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (filename, line, name), (_, calls, own, _, _) in stats.stats.items():
        if any(word in name for word in IDLE):
            continue
        where = filename.split("site-packages/")[-1].split("src/")[-1]
        rows.append({"function": f"{where}:{line}({name})", "own_s_per_step": round(own / steps, 5), "calls_per_step": round(calls / steps, 1)})
    return sorted(rows, key=lambda r: -r["own_s_per_step"])[:count]


def report(result: dict) -> str:
    step, trainer = result["step"], result["trainer_phases_s"]
    lines = [
        "# Where a quickstart step goes",
        "",
        "One quickstart run with a timed trainer rank and the controller under cProfile (`bench/profile_step.py`).",
        f"Medians over {result['steps_measured']} steps after the warm-up; the machine's 1-minute load average went from",
        f"{result['load_average'][0]} to {result['load_average'][1]} (above 2, other work shared the two cores). Produced by:",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "## The step (metrics.jsonl, seconds)",
        "",
        "| phase | s |",
        "| --- | ---: |",
        *(f"| {name} | {seconds:.3f} |" for name, seconds in step.items()),
        "",
        "`wait_for_batch_s` is generation as the trainer sees it (rollouts, environment, rewards); `train_s` includes",
        "building the batch; `sync_s` is publishing the weights; `wait_for_weights_s` the engine loading them.",
        "cProfile slows the controller's Python, which generation waits on: compare with a plain run's metrics.jsonl.",
        "",
        "## The trainer's step (rank 0, seconds)",
        "",
        "| phase | s |",
        "| --- | ---: |",
        *(f"| {name} | {seconds:.3f} |" for name, seconds in trainer.items()),
        "",
        "## The controller process",
        "",
        f"CPU time: {result['controller_cpu_s_per_step']:.3f} s per step ({result['controller_cpu_share_of_run']:.0%} of the run's wall time,",
        "start-up included). Its functions by own CPU time per step (waiting left out):",
        "",
        "| function | own s / step | calls / step |",
        "| --- | ---: | ---: |",
        *(f"| `{r['function']}` | {r['own_s_per_step']:.4f} | {r['calls_per_step']:.0f} |" for r in result["controller_top"]),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
    ray.shutdown()
