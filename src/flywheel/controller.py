"""The RL loop, top to bottom: a rollout stream and a training side joined by a bounded queue;
synchronous when rollout.max_staleness = 0.

    rollout side (rollout/stream.py): while the staleness gate has room, admit the next prompt and
        run its group on an engine replica (router: least outstanding work, failover); score it
        (environment grade or reward pipeline, then the algorithm's shaping); queue it finished.
    training side (train, one step after the other): take the step's groups (BatchPlan: drop stale,
        invalid and, for the algorithm, uninformative ones) -> build_batch (the algorithm's
        advantages) -> trainer.train_step -> publish weights -> every engine loads them in flight
        while the next step already trains (one version loading at a time) -> evaluate / checkpoint.

Invariants: every admitted prompt ends as exactly one trained group or one counted drop, or is
still pending when the run ends (a checkpoint records the pending prompts; a resume re-admits them
first). A replica that dies has its requests resubmitted to another one. Prompt i of the stream
always samples with the same seed, so a run with max_staleness = 0 is reproducible and resumable
exactly. One bad episode never ends the run: an environment that raises or times out, or a
non-finite reward, leaves that episode out of the advantages, counted, its first traceback of each
kind in errors/; an alert fires when the step's share of such episodes passes
rollout.invalid_alert_rate (and stops the run with rollout.stop_on_invalid). Failures of the loop
itself (an engine gone for good, the admission task) are raised, never left to hang it.

Shutdown order: progress bar, rollout tasks, metrics file, reward actors, trainer (removes its
shared-memory weights), engines, then Ray if this loop started it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import ray
import torch
from transformers import AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.config import Config, dump_config
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.remote import RemoteEngine
from flywheel.envs.registry import env_factory, make_env
from flywheel.envs.rollout import episode_metrics, run_group
from flywheel.monitor.faults import FaultLog
from flywheel.monitor.metrics import MetricsLog, read_metrics
from flywheel.monitor.progress import RunProgress
from flywheel.rewards.judge import EngineBackend, Judge
from flywheel.rewards.pipeline import RewardPipeline, Scorer, resolve_guards, reward_model_scorer
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import BatchPlan, Fate, Group, RolloutStream, TaskSet, take_batch
from flywheel.types import Episode
from flywheel.weights import open_transport
from flywheel.weights.base import WeightTransport, WeightUpdate


class RunStopped(RuntimeError):
    """An alert fired whose config asks to stop the run; the message says which."""


@dataclass
class Workers:
    """The workers of one run: engine replicas and a Trainer actor."""

    engines: list[Engine]
    trainer: ray.actor.ActorHandle

    def sync_weights(self) -> int:
        """Trainer publishes, every engine loads; returns the version the engines now serve."""
        update: WeightUpdate = ray.get(self.trainer.publish_weights.remote())

        async def load_all() -> None:
            await asyncio.gather(*(engine.load_weights(update) for engine in self.engines))

        asyncio.run(load_all())
        return update.version

    def shutdown(self) -> None:
        ray.get(self.trainer.close.remote())
        ray.kill(self.trainer)
        for engine in self.engines:
            engine.shutdown()


def _init_ray() -> None:
    if not ray.is_initialized():
        ray.init(num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False, logging_level="error")


def start_engines(config: Config, cpus: float = 1.0) -> list[Engine]:
    """Starts Ray if needed, then ``rollout.engines`` actors of the configured engine (``engine.name``)
    sharing ``cpus`` CPUs (and half a GPU if there is one)."""
    _init_ray()
    count = config.rollout.engines
    actor = ray.remote(engine_class(config.engine)).options(num_cpus=cpus / count, num_gpus=_gpu_share() / count)
    actors = [actor.remote(config) for _ in range(count)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    return [RemoteEngine(a) for a in actors]


def start_trainer(config: Config, transport: WeightTransport) -> ray.actor.ActorHandle:
    """A Trainer actor on one CPU (half a GPU if there is one), publishing weights through ``transport``."""
    from flywheel.trainer.trainer import Trainer

    trainer = ray.remote(Trainer).options(num_cpus=1, num_gpus=_gpu_share()).remote(config, transport)
    ray.get(trainer.__ray_ready__.remote())
    return trainer


def _gpu_share() -> float:
    return 0.5 if torch.cuda.is_available() else 0


def load_tasks(config: Config) -> TaskSet:
    """The environment's train and held-out splits: its own ``splits`` when it has one, else eval
    tasks from another seed, minus any train prompt."""
    t = config.task
    factory = partial(make_env, t.name, **t.env_args)
    env = factory()
    if hasattr(env, "splits"):
        return TaskSet(*env.splits(t.train_size, t.eval_size, t.seed), factory)
    train = env.tasks(t.train_size, t.seed)
    seen = {task.prompt for task in train}
    return TaskSet(train, [task for task in env.tasks(t.eval_size, t.seed + 1) if task.prompt not in seen], factory)


def task_scores(completions: list[str], tasks: list[dict]) -> tuple[list[float], dict[str, float]]:
    """The environment's own grade, computed before the pipeline."""
    return [t["reward"] for t in tasks], {}


def reward_pipeline(config: Config, env_guards: Sequence[str], policy_engine: Engine) -> tuple[RewardPipeline | None, Callable[[], None]]:
    """The configured reward pipeline (the task's grade + judge + reward model, then the guards) and
    a function stopping the actors it started (reward model, judge engine); None when ``reward``
    configures nothing beyond the task's grade."""
    r = config.reward
    models: list[ray.actor.ActorHandle] = []
    engines: list[Engine] = []

    def stop() -> None:
        for actor in models:
            ray.kill(actor)
        for engine in engines:
            engine.shutdown()

    if not (resolve_guards(r, env_guards) or r.judge.enabled or r.reward_model.path):
        return None, stop
    scorers, judge = [Scorer("task", task_scores)], None
    if r.reward_model.path:
        from flywheel.rewards.reward_model import RewardModel

        rm = r.reward_model
        model = ray.remote(RewardModel).options(num_cpus=0).remote(rm.path, batch_size=rm.batch_size, max_length=rm.max_length, threads=1)
        scorers.append(reward_model_scorer(model.score.remote, rm.weight))
        models.append(model)
    if r.judge.enabled and r.judge.engine != "endpoint":  # a vLLM engine in the run; it cannot constrain output
        if r.judge.engine == "own":
            judge_config = config.model_copy(update={"model": config.model.model_copy(update={"path": r.judge.model_path}), "rollout": config.rollout.model_copy(update={"engines": 1})})
            engines += start_engines(judge_config, cpus=0)
        engine = engines[0] if r.judge.engine == "own" else policy_engine
        path = r.judge.model_path if r.judge.engine == "own" else config.model.path
        judge = Judge(EngineBackend(engine, path, max_tokens=r.judge.max_tokens, seed=config.run.seed), structured=False)
    return RewardPipeline.from_config(r, rubric=None, scorers=scorers, judge=judge, env_guards=env_guards), stop


async def evaluate(router: EngineRouter, tokenizer, tasks: TaskSet, temperature: float, config: Config) -> dict[str, float]:
    """One episode of every held-out task (task k samples with seed run.seed + k): accuracy (mean
    reward of the valid episodes) and the environment's tool and turn metrics."""
    seed, max_tokens = config.run.seed, config.rollout.max_new_tokens
    runs = (run_group(router, tokenizer, tasks.env_factory, task, 1, temperature, max_tokens, seed + k) for k, task in enumerate(tasks.eval))
    episodes = [e for group in await asyncio.gather(*runs) for e in group]
    valid = [e for e in episodes if e.valid]
    return {"accuracy": sum(e.reward for e in valid) / max(len(valid), 1)} | episode_metrics(episodes)


async def eval_metrics(router: EngineRouter, tokenizer, tasks: TaskSet, config: Config) -> dict[str, float]:
    """eval/... at the eval temperature and, if asked, eval/greedy_accuracy (temperature 0)."""
    metrics = {f"eval/{key}": value for key, value in (await evaluate(router, tokenizer, tasks, config.eval.temperature, config)).items()}
    if config.eval.greedy:
        metrics["eval/greedy_accuracy"] = (await evaluate(router, tokenizer, tasks, 0.0, config))["accuracy"]
    return metrics


def step_metrics(step: int, episodes: list[Episode], seconds: dict[str, float], generated_tokens: int, version: int) -> dict[str, float]:
    """The rollout-side metrics of one step (rewards over valid episodes). seconds: wait_for_batch
    (trainer starved), train, sync (publishing, after the previous version's load), wait_for_weights
    (engines paused by the previous load), step."""
    tokens = sum(len(e.completion.token_ids) for e in episodes)
    valid = [e.reward for e in episodes if e.valid]
    return {
        "step": step,
        "reward/mean": sum(valid) / max(len(valid), 1),
        "rollout/response_length_mean": tokens / len(episodes),
        "rollout/truncated_frac": sum(e.completion.truncated for e in episodes) / len(episodes),
        **{f"timing/{name}": value for name, value in seconds.items()},
        "rollout/tokens_per_s": generated_tokens / seconds["step_s"],
        "train/tokens_per_s": tokens / seconds["train_s"],
        "weights/version": version,
    }


def new_run_dir(config: Config) -> Path:
    """output_dir/name, or name-1, name-2... if taken: an earlier run is never overwritten."""
    root = Path(config.run.output_dir)
    candidate, suffix = root / config.run.name, 0
    while candidate.exists():
        suffix += 1
        candidate = root / f"{config.run.name}-{suffix}"
    candidate.mkdir(parents=True)
    return candidate


def latest_checkpoint(run_dir: Path) -> tuple[Path, dict]:
    """The newest checkpoint with both trainer and controller state, and the controller state."""
    complete = [p for p in run_dir.glob("checkpoints/step_*") if (p / "trainer_state.pt").is_file() and (p / "controller.json").is_file()]
    latest = max(complete, key=lambda p: int(p.name.removeprefix("step_")))
    return latest, json.loads((latest / "controller.json").read_text())


async def save_checkpoint(trainer: ray.actor.ActorHandle, directory: Path, step: int, stream: RolloutStream) -> None:
    """Trainer state first, controller state last: a checkpoint without controller.json is incomplete."""
    await trainer.save_checkpoint.remote(str(directory))
    state = {
        "step": step, "next_position": stream.next_position, "pending": stream.pending(),
        "accepted": stream.accepted - len(stream.queued),  # finished groups still queued will be re-admitted
    }
    (directory / "controller.json").write_text(json.dumps(state))


async def load_everywhere(router: EngineRouter, stream: RolloutStream, update: WeightUpdate) -> float:
    """Every engine loads ``update`` in flight, then the staleness gate widens; returns the pause."""
    paused = await router.load_weights(update)
    stream.serve(update.version)
    return paused


class RolloutDump:
    """rollouts.jsonl: one line per admitted group and what became of it (when run.dump_rollouts)."""

    def __init__(self, path: Path | None) -> None:
        self.file = path.open("a") if path else None

    def __call__(self, group: Group, fate: str, trainer_version: int) -> None:
        if self.file is None:
            return
        row = {
            "position": group.position, "fate": fate, "trainer_version": trainer_version,
            "rewards": [e.reward for e in group.episodes],
            "token_ids": [e.completion.token_ids for e in group.episodes],
            "weight_versions": [list(e.completion.weight_versions) for e in group.episodes],
        }
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file:
            self.file.close()


def train(config: Config, workers: Workers | None = None) -> Path:
    """Runs config.run.steps steps; returns the run directory. Starts (and stops) workers if none given.

    With ``run.resume`` it continues that run from its latest checkpoint: metrics after it are
    dropped and recomputed; with max_staleness = 0 the continued run equals the uninterrupted one.
    """
    own_workers, own_ray = workers is None, not ray.is_initialized()
    workers = workers or Workers(start_engines(config), start_trainer(config, open_transport(config.weights)))
    try:
        return asyncio.run(_train(config, workers))
    finally:
        if own_workers:
            workers.shutdown()
            if own_ray:
                ray.shutdown()


def _open_run(config: Config) -> tuple[Path, Path | None, dict]:
    """(run directory, checkpoint to resume from or None, controller state); a resume drops what
    came after its checkpoint from metrics.jsonl and rollouts.jsonl."""
    if not config.run.resume:
        run_dir = new_run_dir(config)
        (run_dir / "config.yaml").write_text(dump_config(config))
        return run_dir, None, {"step": 0, "next_position": 0, "pending": [], "accepted": 0}
    run_dir = Path(config.run.resume)
    checkpoint, state = latest_checkpoint(run_dir)
    metrics_path, dump_path = run_dir / "metrics.jsonl", run_dir / "rollouts.jsonl"
    kept = [row for row in read_metrics(metrics_path) if row["step"] <= state["step"]]
    metrics_path.write_text("".join(json.dumps(row) + "\n" for row in kept))
    if dump_path.is_file():  # a group trained at step k was trained on version k - 1
        fates = [row for row in read_metrics(dump_path) if row["fate"] != "pending" and row["trainer_version"] < state["step"]]
        dump_path.write_text("".join(json.dumps(row) + "\n" for row in fates))
    return run_dir, checkpoint, state


def watch_invalid(step: int, row: dict[str, float], config: Config) -> list[str]:
    """The invalid-episode alert of a step (one sentence); raises RunStopped when asked to stop."""
    rate, limit = row["rollout/invalid_frac"], config.rollout.invalid_alert_rate
    if rate <= limit:
        return []
    alert = f"{rate:.0%} of this step's episodes were invalid (environment errors {row['env/errors']:.0f}, timeouts {row['env/timeouts']:.0f}, non-finite rewards {row['reward/nonfinite']:.0f}), above rollout.invalid_alert_rate {limit:.0%}; first tracebacks in errors/."
    if config.rollout.stop_on_invalid:
        raise RunStopped(alert + " Stopping the run (rollout.stop_on_invalid is true).")
    return [alert]


async def _train(config: Config, workers: Workers) -> Path:
    run_dir, checkpoint, state = _open_run(config)
    first_step = state["step"] + 1
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks, algorithm = load_tasks(config), make_algorithm(config.algorithm)
    trainer, router = workers.trainer, EngineRouter(workers.engines)
    env_guards = getattr(env_factory(config.task.name), "guards", ())  # declared on the class
    pipeline, stop_reward_actors = reward_pipeline(config, env_guards, workers.engines[0])
    if checkpoint is not None:
        await trainer.restore.remote(str(checkpoint))
    log = MetricsLog(run_dir / "metrics.jsonl")
    dump = RolloutDump(run_dir / "rollouts.jsonl" if config.run.dump_rollouts else None)
    faults = FaultLog(run_dir / "errors")
    started = time.perf_counter()
    stream = RolloutStream(router, tokenizer, tasks, config, state, algorithm, pipeline)
    update = await trainer.publish_weights.remote()
    await load_everywhere(router, stream, update)
    version = update.version
    loading: asyncio.Task | None = None  # the engines loading the latest weights
    try:
        with RunProgress(config.run.steps, config.run.progress) as progress:
            progress.log(f"run directory: {run_dir}" + (f" (resumed after step {first_step - 1})" if checkpoint else ""))
            if checkpoint is None:
                row = {"step": 0, "weights/version": version, **await eval_metrics(router, tokenizer, tasks, config)}
                progress.evaluated(row)
                log.write(row)
            stream.start()
            for step in range(first_step, config.run.steps + 1):
                t0 = time.perf_counter()
                r = config.rollout
                plan = BatchPlan(r.prompts_per_step, algorithm.sampling_rounds, version, r.max_staleness, r.min_valid_episodes, algorithm.keep_group)

                def record(group: Group, fate: Fate, trainer_version: int, step: int = step) -> None:
                    dump(group, fate, trainer_version)
                    for kind in filter(None, (faults.record(e, step) for e in group.episodes)):
                        progress.log(f"step {step:4d}  first episode fault of kind {kind}: errors/{kind}.txt")

                groups, rollout_metrics = await take_batch(stream, plan, record)
                generated, stream.generated_tokens = stream.generated_tokens, 0
                t1 = time.perf_counter()
                batch = await build_batch([g.episodes for g in groups], algorithm, tokenizer.pad_token_id, trainer)
                train_metrics = await trainer.train_step.remote(batch)
                for group in groups:
                    record(group, "trained", version)
                t2 = time.perf_counter()
                paused = await loading if loading else 0.0  # one version in flight at a time
                update = await trainer.publish_weights.remote()
                version = update.version
                loading = asyncio.create_task(load_everywhere(router, stream, update), name="load-weights")  # during the next step
                t3 = time.perf_counter()
                seconds = {"wait_for_batch_s": rollout_metrics.pop("timing/wait_for_batch_s"), "train_s": t2 - t1, "sync_s": t3 - t2,
                           "wait_for_weights_s": paused, "step_s": t3 - t0}
                episodes = [e for g in groups for e in g.episodes]
                row = step_metrics(step, episodes, seconds, generated, version) | rollout_metrics | train_metrics
                row |= {"engines/live": router.live_count, "engines/resubmitted": router.resubmitted}
                if train_metrics["train/nonfinite_skipped"]:
                    progress.log(f"step {step:4d}  non-finite loss or gradient: {train_metrics['train/nonfinite_skipped']:.0%} of the optimiser steps skipped")
                alerts = watch_invalid(step, row, config) + (pipeline.watch(step, row) if pipeline else [])  # may raise to stop
                for alert in alerts:
                    progress.log(f"step {step:4d}  {alert}")
                if step % config.eval.every == 0 or step == config.run.steps:
                    await loading  # evaluate the weights of this step
                    row |= await eval_metrics(router, tokenizer, tasks, config)
                    progress.evaluated(row)
                if step % config.run.checkpoint_every == 0:
                    await save_checkpoint(trainer, run_dir / "checkpoints" / f"step_{step}", step, stream)
                row["timing/elapsed_s"] = time.perf_counter() - started
                log.write(row)
                progress.step(row)
            await trainer.save_checkpoint.remote(str(run_dir / "final"), resumable=False)
            progress.log(f"done in {time.perf_counter() - started:.0f}s: final model in {run_dir / 'final'}")
    finally:
        if loading:
            await asyncio.gather(loading, return_exceptions=True)
        leftover = stream.pending()
        await stream.stop()
        for position in leftover:
            dump(Group(position, []), "pending", version)
        log.close()
        dump.close()
        stop_reward_actors()
    return run_dir
