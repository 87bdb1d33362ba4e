"""The RL loop, top to bottom: a rollout stream and a training side joined by a bounded queue;
synchronous when rollout.max_staleness = 0.

    rollout side (rollout/stream.py): while the staleness gate has room, admit the next prompt and
        run its group on an engine replica (router: least outstanding work, failover); score it
        (environment grade or reward pipeline, then the algorithm's shaping); queue it finished.
    training side (train, one step after the other): take the step's groups (BatchPlan: drop stale,
        invalid and, for the algorithm, uninformative ones) -> build_batch (the algorithm's
        advantages) -> trainer.train_step -> publish weights -> every engine loads them in flight
        while the next step already trains (one version loading at a time) -> evaluate (on the run's
        engines, or on eval.engines replicas of its own in the background) / checkpoint.

Invariants: every admitted prompt ends as exactly one trained group or one counted drop, or is
still pending when the run ends (a checkpoint records the pending prompts; a resume re-admits them
first). A replica that dies has its requests resubmitted to another one and is restarted in the
background (at most rollout.max_engine_restarts times a run), loading the latest weights before it
takes requests. Prompt i of the stream always samples with the same seed, so a run with
max_staleness = 0 is reproducible and resumable exactly. One bad episode never ends the run: an environment that raises or times out, or a
non-finite reward, leaves that episode out of the advantages, counted, its first traceback of each
kind in errors/; an alert fires when the step's share of such episodes passes
rollout.invalid_alert_rate (and stops the run with rollout.stop_on_invalid); every step's row is
checked for the health alerts of monitor/alerts.py (alerts.jsonl; a stop if alerts.stop_on says so). Failures of the loop
itself (an engine gone for good, the admission task) are raised, never left to hang it; a trainer
rank that dies ends the run with TrainerLost, naming the checkpoint to resume from.

Shutdown order: progress bar, rollout tasks, replacement engines (restarted ones), metrics file,
reward actors, trainer (removes its shared-memory weights), engines, then Ray if this loop started it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import ray
from transformers import AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.cluster.workers import Workers, local_run_spec, run_spec, start_reward_actors, start_workers
from flywheel.config import Config
from flywheel.engines.heap import startup_heap_frozen
from flywheel.envs.registry import env_factory
from flywheel.eval.background import start_background_eval
from flywheel.eval.heldout import eval_metrics, eval_sets
from flywheel.monitor.alerts import Alert, AlertLog
from flywheel.monitor.faults import FaultLog
from flywheel.monitor.progress import RunProgress
from flywheel.monitor.rollout_parquet import dump_path, rollout_rows, write_rollouts
from flywheel.monitor.run_dir import RolloutDump, newest_checkpoint, open_run
from flywheel.monitor.timed_engine import timed_router, untimed
from flywheel.monitor.trackers import Trackers
from flywheel.rewards.wiring import reward_pipeline
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import BatchPlan, Fate, Group, RolloutStream, load_tasks, take_batch
from flywheel.timeline import Timeline
from flywheel.trainer.group import TrainerDied, TrainerGroup
from flywheel.types import Episode
from flywheel.weights import open_transport
from flywheel.weights.base import WeightUpdate


class RunStopped(RuntimeError):
    """An alert fired whose config asks to stop the run; the message says which."""


class TrainerLost(RuntimeError):
    """A trainer rank died: the message names the rank, the step and the checkpoint to resume from
    (``checkpoint``: None when none was saved yet)."""

    def __init__(self, died: TrainerDied, step: int, run_dir: Path) -> None:
        self.run_dir, self.checkpoint = run_dir, newest_checkpoint(run_dir)
        if self.checkpoint is None:
            then = "no checkpoint was saved yet, so start the run again"
        else:
            then = f"its latest checkpoint is {self.checkpoint}: continue with run.resume={run_dir}"
        super().__init__(f"trainer rank {died.rank} died at step {step} (during {died.method}); {then}")


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


async def save_checkpoint(trainer: TrainerGroup, directory: Path, step: int, stream: RolloutStream) -> None:
    """Trainer state first, controller state last: a checkpoint without controller.json is incomplete."""
    await trainer.save_checkpoint(str(directory))
    state = {
        "step": step,
        "next_position": stream.next_position,
        "pending": stream.pending(),
        "accepted": stream.accepted - len(stream.queued),  # finished groups still queued will be re-admitted
    }
    (directory / "controller.json").write_text(json.dumps(state))


async def load_everywhere(router: EngineRouter, stream: RolloutStream, update: WeightUpdate) -> float:
    """Every engine loads ``update`` in flight, then the staleness gate widens; returns the pause."""
    paused = await router.load_weights(update)
    stream.serve(update.version)
    return paused


def train(config: Config, workers: Workers | None = None) -> Path:
    """Runs config.run.steps steps; returns the run directory. Starts (and stops) workers if none given.

    With ``run.resume`` it continues that run from its latest checkpoint: metrics after it are
    dropped and recomputed; with max_staleness = 0 the continued run equals the uninterrupted one.
    Workers started here for an asynchronous run on one CPU machine get separate cores (cluster/cores.py).
    """
    own_workers, own_ray = workers is None, not ray.is_initialized()
    if workers is None:
        spec = local_run_spec(config)
        config, workers = spec.config, start_workers(spec, open_transport(config.weights, config.rollout.engines))
    try:
        with startup_heap_frozen():  # a full collection would walk every module and Ray's state, stalling the loop
            return asyncio.run(_train(config, workers, list(workers.notes)))
    finally:
        if own_workers:
            workers.shutdown()
            if own_ray:
                ray.shutdown()


def watch_invalid(step: int, row: dict[str, float], config: Config) -> list[Alert]:
    """The invalid-episode alert of a step (one sentence), if its share passes rollout.invalid_alert_rate."""
    rate, limit = row["rollout/invalid_frac"], config.rollout.invalid_alert_rate
    if rate <= limit:
        return []
    text = f"{rate:.0%} of this step's episodes were invalid (environment errors {row['env/errors']:.0f}, timeouts {row['env/timeouts']:.0f}, non-finite rewards {row['reward/nonfinite']:.0f}, reward errors {row['reward/errors']:.0f}, reward timeouts {row['reward/timeouts']:.0f}), above rollout.invalid_alert_rate {limit:.0%}; first tracebacks in errors/."
    return [Alert(step, "invalid_episodes", text)]


def stop_reason(stops: list[Alert], config: Config) -> str:
    """The sentence a run stopped by alerts ends with: the alerts, then the setting that asked to stop."""
    kinds = sorted({a.kind for a in stops})
    setting = (
        "rollout.stop_on_invalid is true"
        if kinds == ["invalid_episodes"] and "invalid_episodes" not in config.alerts.stop_on
        else f"alerts.stop_on has {', '.join(kinds)}"
    )
    return " ".join(a.message for a in stops) + f" Stopping the run ({setting})."


async def _train(config: Config, workers: Workers, notes: list[str]) -> Path:
    run_dir, checkpoint, state = open_run(config)
    step = first_step = state["step"] + 1  # the step under way, named if a trainer rank dies
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks, algorithm, more_evals = load_tasks(config), make_algorithm(config.algorithm), eval_sets(config)
    trainer = workers.trainer
    timeline = Timeline(run_dir / "timeline.jsonl" if config.monitor.timeline else None)
    router = timed_router(
        workers.engines, workers.restart_engine, config.rollout.max_engine_restarts, timeline, workers.engine_restarts, workers.rejoin
    )
    env_guards = getattr(env_factory(config.task.name), "guards", ())  # declared on the class
    log = Trackers(run_dir, config)  # before the reward actors: a busy Prometheus port fails here
    spec = run_spec(config)  # the specs of the run's other actors (config is resolved already)
    reward_actors = start_reward_actors(spec)
    # a judge on the policy's engines calls the router, so it follows restarted replicas
    pipeline = reward_pipeline(config, env_guards, router, reward_actors.judge, reward_actors.score_texts())
    background = start_background_eval(spec.eval_engines, tokenizer, tasks, more_evals, config) if spec.eval_engines else None
    dump = RolloutDump(run_dir / "rollouts.jsonl" if config.run.dump_rollouts else None)
    faults = FaultLog(run_dir / "errors")
    started = time.perf_counter()
    alerts = AlertLog(config.alerts, run_dir / "alerts.jsonl", lambda text: print(text, flush=True), started)
    stream = RolloutStream(router, tokenizer, tasks, config, state, algorithm, pipeline)
    stream.timeline = timeline
    version = state["step"]
    loading: asyncio.Task | None = None  # the engines loading the latest weights
    try:
        if checkpoint is not None:
            await trainer.restore(str(checkpoint))
        update = await trainer.publish_weights()
        await load_everywhere(router, stream, update)
        version = update.version
        with RunProgress(config.run.steps, config.run.progress) as progress:
            router.log = alerts.say = progress.log  # restarts of engine replicas, alerts
            progress.log(f"run directory: {run_dir}" + (f" (resumed after step {first_step - 1})" if checkpoint else ""))
            for line in [*notes, *log.describe()]:
                progress.log(line)
            if background:
                background.report = lambda row: (log.log(row, row["step"]), progress.evaluated(row))
            if checkpoint is None:
                if background:
                    await background.start(0, update)
                else:
                    with timeline.span("controller", "eval"):
                        row = {"step": 0, "weights/version": version, **await eval_metrics(router, tokenizer, tasks, config, more_evals)}
                    progress.evaluated(row)
                    log.log(row, 0)
            stream.start()
            for step in range(first_step, config.run.steps + 1):
                t0, timeline.step = time.perf_counter(), step
                dump_now = config.monitor.dump_every > 0 and step % config.monitor.dump_every == 0
                r = config.rollout
                plan = BatchPlan(r.prompts_per_step, algorithm.sampling_rounds, version, r.max_staleness, r.min_valid_episodes, algorithm.keep_group)

                def record(group: Group, fate: Fate, trainer_version: int, step: int = step) -> None:
                    dump(group, fate, trainer_version)
                    for kind in filter(None, (faults.record(e, step) for e in group.episodes)):
                        progress.log(f"step {step:4d}  first episode fault of kind {kind}: errors/{kind}.txt")

                with timeline.span("controller", "wait_for_batch"):
                    groups, rollout_metrics = await take_batch(stream, plan, record)
                generated, stream.generated_tokens = stream.generated_tokens, 0
                t1 = time.perf_counter()
                with timeline.span("controller", "train"):
                    batch = await build_batch([g.episodes for g in groups], algorithm, tokenizer.pad_token_id, trainer)
                    train_metrics = await trainer.train_step(batch, keep_logprobs=dump_now)
                for stage, start, end in train_metrics.pop("timeline/spans", []):  # the trainer's own clock: time.time()
                    timeline.add("trainer", stage, start, end)
                trainer_logprobs = train_metrics.pop("trainer/logprobs", None)
                for group in groups:
                    record(group, "trained", version)
                t2 = time.perf_counter()
                with timeline.span("controller", "sync"):
                    paused = await loading if loading else 0.0  # one version in flight at a time
                    with timeline.span("trainer", "publish"):
                        update = await trainer.publish_weights()
                    version = update.version
                    loading = asyncio.create_task(load_everywhere(router, stream, update), name="load-weights")  # during the next step
                t3 = time.perf_counter()
                if dump_now:
                    rows = rollout_rows(step, config.task.name, groups, batch, trainer_logprobs, tokenizer)
                    await asyncio.to_thread(write_rollouts, dump_path(run_dir, step), rows)
                seconds = {
                    "wait_for_batch_s": rollout_metrics.pop("timing/wait_for_batch_s"),
                    "train_s": t2 - t1,
                    "sync_s": t3 - t2,
                    "wait_for_weights_s": paused,
                    "step_s": t3 - t0,
                }
                episodes = [e for g in groups for e in g.episodes]
                row = step_metrics(step, episodes, seconds, generated, version) | rollout_metrics | train_metrics
                row |= {"engines/live": router.live_count, "engines/resubmitted": router.resubmitted, "engines/restarts": router.restarts}
                invalid = watch_invalid(step, row, config)
                hacking = [Alert(step, "hacking", text) for text in (pipeline.watch(step, row) if pipeline else [])]  # may raise to stop
                stops = list(dict.fromkeys(alerts.step(step, row, invalid + hacking) + (invalid if config.rollout.stop_on_invalid else [])))
                eval_due = step % config.eval.every == 0 or step == config.run.steps
                if eval_due and background:
                    await background.start(step, update)  # evaluates this step's weights while the next steps train
                elif eval_due:
                    with timeline.span("controller", "eval"):
                        await loading  # evaluate the weights of this step
                        row |= await eval_metrics(router, tokenizer, tasks, config, more_evals)
                    progress.evaluated(row)
                if step % config.run.checkpoint_every == 0:
                    with timeline.span("controller", "checkpoint"):
                        await save_checkpoint(trainer, run_dir / "checkpoints" / f"step_{step}", step, stream)
                row["timing/elapsed_s"] = time.perf_counter() - started
                log.log(row, step)
                progress.step(row)
                if stops:
                    raise RunStopped(stop_reason(stops, config))
            if background:
                await background.finish()
            with timeline.span("controller", "checkpoint"):
                await trainer.save_checkpoint(str(run_dir / "final"), resumable=False)
            progress.log(f"done in {time.perf_counter() - started:.0f}s: final model in {run_dir / 'final'}")
    except TrainerDied as died:
        raise TrainerLost(died, step, run_dir) from died
    finally:
        if loading:
            await asyncio.gather(loading, return_exceptions=True)
        leftover = stream.pending()
        await stream.stop()
        await router.close(keep_serving=workers.hand_back)
        if workers.hand_back:  # the replicas serving now (replacements included) serve the next attempt
            workers.engines, workers.engine_restarts = untimed(router.engines), router.restarts
        if background:
            await background.close()
        for position in leftover:
            dump(Group(position, []), "pending", version)
        log.close()
        alerts.close()
        timeline.close()
        dump.close()
        await reward_actors.stop()
    return run_dir
