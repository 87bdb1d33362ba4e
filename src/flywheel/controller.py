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

The loop has three parts: ``setup`` builds a ``Run`` (the parts: router, stream, reward pipeline,
background eval, the run directory's writers), ``train_step`` is one step, ``close`` releases the
parts. The producer (the stream's admission task) and the training side (``train_steps``) run as
named tasks; a failure of either ends the other and is raised.

Preemption (preemption.py): SIGTERM, SIGINT or SIGUSR1 stops the training side before its next step; a step
waiting for its batch is abandoned at once (the trainer still holds the last step done), one
training gets half of run.stop_timeout_s to finish. The last step done is checkpointed (with the
controller state recorded when it ended, so the prompts of an abandoned batch are pending again),
the run closes as below and raises Preempted naming the checkpoint. A second signal abandons
whatever is under way, the checkpoint included, and closes. A stop still under way run.stop_timeout_s
after the signal is cut short: the run's processes are killed (``StopSignals``).

Shutdown order: the weights load in flight, rollout tasks and rollout workers, replacement engines (restarted ones),
background evaluation, the run directory's writers (one owner, ``RunWriters``: progress bar, metrics
file and trackers, alert log, timeline, rollout dump), reward actors, trainer (removes its
shared-memory weights), engines, then Ray if this loop started it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import ray
from transformers import AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.base import Algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.algorithms.distill import Score, teacher_metrics
from flywheel.cluster.workers import RewardActors, Workers, local_run_spec, run_spec, start_reward_actors, start_rollout_workers, start_workers
from flywheel.config import Config
from flywheel.engines.base import Loaded
from flywheel.engines.heap import startup_heap_frozen
from flywheel.envs.registry import env_factory
from flywheel.eval.background import BackgroundEval, start_background_eval
from flywheel.eval.heldout import eval_metrics, eval_sets
from flywheel.monitor.alerts import Alert, AlertLog
from flywheel.monitor.faults import FaultLog
from flywheel.monitor.progress import RunProgress
from flywheel.monitor.rollout_parquet import dump_path, rollout_rows, write_rollouts
from flywheel.monitor.run_dir import RolloutDump, newest_checkpoint, open_run
from flywheel.monitor.timed_engine import timed_router, untimed
from flywheel.monitor.trackers import Trackers
from flywheel.preemption import Preempted, StopSignals
from flywheel.rewards.pipeline import RewardPipeline
from flywheel.rewards.wiring import reward_pipeline
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import BatchPlan, Fate, Group, RolloutStream, TaskSet, load_tasks, load_within_stall_limit, take_batch
from flywheel.timeline import Timeline
from flywheel.trainer.group import TrainerDied, TrainerGroup
from flywheel.types import Episode
from flywheel.weights import open_transport
from flywheel.weights.base import WeightUpdate

T = TypeVar("T")


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


def train(config: Config, workers: Workers | None = None) -> Path:
    """Runs config.run.steps steps; returns the run directory. Starts (and stops) workers if none given.

    With ``run.resume`` it continues that run from its latest checkpoint: metrics after it are
    dropped and recomputed; with max_staleness = 0 the continued run equals the uninterrupted one.
    Workers started here for an asynchronous run on one CPU machine get separate cores (cluster/cores.py).
    SIGTERM, SIGINT or SIGUSR1 stops the run (``Preempted``, see ``stop_soon``).
    """
    own_workers, own_ray = workers is None, not ray.is_initialized()
    signals, started = StopSignals(deadline_s=config.run.stop_timeout_s).install(), None
    try:
        if own_workers:
            spec = local_run_spec(config)
            config, workers = spec.config, (started := start_workers(spec, open_transport(config.weights, config.rollout.engines)))
        signals.install()  # ray.init replaced SIGTERM's handler
        with startup_heap_frozen():  # a full collection would walk every module and Ray's state, stalling the loop
            return asyncio.run(_train(config, workers, list(workers.notes), signals))
    finally:
        if started:
            started.shutdown()
        if own_ray and ray.is_initialized():  # a second signal may interrupt start_workers
            ray.shutdown()
        signals.restore()


async def _train(config: Config, workers: Workers, notes: list[str], signals: StopSignals) -> Path:
    run = setup(config, workers, signals)
    main = asyncio.current_task()
    signals.attach(asyncio.get_running_loop(), partial(stop_soon, run), partial(stop_now, run, main))
    try:
        await begin(run, notes)
        producer = run.stream.start()
        run.steps = asyncio.create_task(train_steps(run), name="train-steps")
        await until_first_failure(producer, run.steps)
    except asyncio.CancelledError:
        if not signals.asked:
            raise
        main.uncancel()  # a second signal: close now
        if run.steps:
            run.steps.cancel()
            await asyncio.gather(run.steps, return_exceptions=True)
    except TrainerDied as died:
        raise TrainerLost(died, run.step, run.run_dir) from died
    finally:
        signals.detach()
        await close(run)
    if signals.asked:
        how = {"dirty": "abandoning the step in flight", "at once": "at once by a second signal"}.get(run.abandoned, "at a step boundary")
        raise Preempted(signals.asked, run.completed, run.run_dir, newest_checkpoint(run.run_dir), how)
    return run.run_dir


@dataclass
class RunWriters:
    """The run directory's writers, one owner: opened together by ``open``, closed once by ``close``
    (progress bar, metrics file and trackers, alert log, timeline, rollout dump: the reverse of opening)."""

    dump: RolloutDump
    timeline: Timeline
    faults: FaultLog
    alerts: AlertLog
    trackers: Trackers
    progress: RunProgress
    _opened: ExitStack

    @classmethod
    def open(cls, run_dir: Path, config: Config, started: float) -> RunWriters:
        """Trackers open here, before any actor starts: a busy Prometheus port fails first."""
        with ExitStack() as stack:
            dump = stack.enter_context(closing(RolloutDump(run_dir / "rollouts.jsonl" if config.run.dump_rollouts else None)))
            timeline = stack.enter_context(closing(Timeline(run_dir / "timeline.jsonl" if config.monitor.timeline else None)))
            alerts = stack.enter_context(closing(AlertLog(config.alerts, run_dir / "alerts.jsonl", lambda text: print(text, flush=True), started)))
            trackers = stack.enter_context(closing(Trackers(run_dir, config)))
            progress = stack.enter_context(RunProgress(config.run.steps, config.run.progress))
            alerts.say = progress.log
            writers = cls(dump, timeline, FaultLog(run_dir / "errors"), alerts, trackers, progress, stack.pop_all())
        return writers

    def close(self) -> None:
        self._opened.close()


@dataclass
class Run:
    """The parts of one run (built by ``setup``, released by ``close``) and where it stands."""

    config: Config
    run_dir: Path
    checkpoint: Path | None  # the checkpoint resumed from
    first_step: int
    workers: Workers
    tokenizer: Any
    tasks: TaskSet
    more_evals: dict[str, TaskSet]
    algorithm: Algorithm
    writers: RunWriters
    router: EngineRouter
    pipeline: RewardPipeline | None
    reward_actors: RewardActors
    background: BackgroundEval | None
    stream: RolloutStream
    started: float
    version: int  # the latest weights published
    step: int  # the step under way, named if a trainer rank dies
    completed: int  # the last step done (its row logged)
    resume_state: dict  # the controller state after it: what a checkpoint of it holds
    signals: StopSignals
    update: WeightUpdate | None = None  # the latest weights published
    loading: asyncio.Task | None = None  # the engines loading them
    proof: dict[str, float] = field(default_factory=dict)  # the proof metrics of the last version the engines finished loading
    steps: asyncio.Task | None = None  # the training side
    waiting: bool = False  # the training side waits for its batch: the trainer holds step ``completed``
    abandoned: Literal["clean", "dirty", "at once"] | None = None  # how a stop ended the step in flight

    @property
    def trainer(self) -> TrainerGroup:
        return self.workers.trainer

    @property
    def teacher_score(self) -> Score | None:
        """The distillation teacher's scoring call (``algorithm.teacher``), or None."""
        return None if self.reward_actors.teacher is None else self.reward_actors.teacher.score

    def plan(self) -> BatchPlan:
        r, a = self.config.rollout, self.algorithm
        return BatchPlan(r.prompts_per_step, a.sampling_rounds, self.version, r.max_staleness, r.min_valid_episodes, a.keep_group)

    def record(self, group: Group, fate: Fate, trainer_version: int, step: int) -> None:
        """A group's fate in the rollout dump; an episode fault of a new kind in errors/ (and a line)."""
        self.writers.dump(group, fate, trainer_version)
        for kind in filter(None, (self.writers.faults.record(e, step) for e in group.episodes)):
            self.writers.progress.log(f"step {step:4d}  first episode fault of kind {kind}: errors/{kind}.txt")


def setup(config: Config, workers: Workers, signals: StopSignals) -> Run:
    """Opens the run directory and its writers, the router over the engines, the reward pipeline,
    background evaluation and the rollout stream; starts nothing that generates."""
    run_dir, checkpoint, state = open_run(config)
    signals.run_dir = run_dir  # named if a stop is cut short
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks, algorithm, more_evals = load_tasks(config), make_algorithm(config.algorithm), eval_sets(config)
    writers = RunWriters.open(run_dir, config, started)
    try:
        w = workers
        router = timed_router(w.engines, w.restart_engine, config.rollout.max_engine_restarts, writers.timeline, w.engine_restarts, w.rejoin)
        router.log = writers.progress.log  # restarts of engine replicas
        env_guards = getattr(env_factory(config.task.name), "guards", ())  # declared on the class
        spec = run_spec(config)  # the specs of the run's other actors (config is resolved already)
        reward_actors = start_reward_actors(spec)
        # a judge on the policy's engines calls the router, so it follows restarted replicas
        pipeline = reward_pipeline(config, env_guards, router, reward_actors.judge, reward_actors.score_texts())
        background = start_background_eval(spec.eval_engines, tokenizer, tasks, more_evals, config) if spec.eval_engines else None
        rollout_workers = (
            start_rollout_workers(spec.rollout_workers, reward_actors.reward_model, writers.progress.log, reward_actors.judge)
            if spec.rollout_workers
            else None
        )
    except BaseException:
        writers.close()
        raise
    stream = RolloutStream(router, tokenizer, tasks, config, state, algorithm, pipeline, rollout_workers)
    stream.timeline = writers.timeline
    first = state["step"] + 1
    return Run(
        config, run_dir, checkpoint, first, workers, tokenizer, tasks, more_evals, algorithm, writers, router, pipeline, reward_actors, background,
        stream, started, version=state["step"], step=first, completed=state["step"], resume_state=state, signals=signals,
    )  # fmt: skip


async def begin(run: Run, notes: list[str]) -> None:
    """Restores the checkpoint, loads the trainer's weights everywhere, evaluates step 0 of a new run."""
    w = run.writers
    if run.checkpoint is not None:
        await run.trainer.restore(str(run.checkpoint))
    await publish_and_load(run)
    resumed = f" (resumed after step {run.first_step - 1})" if run.checkpoint else ""
    for line in [f"run directory: {run.run_dir}{resumed}", *notes, *w.trackers.describe()]:
        w.progress.log(line)
    if run.background:
        run.background.report = lambda row: (w.trackers.log(row, row["step"]), w.progress.evaluated(row))
    if run.checkpoint is None:
        if run.background:
            await run.background.start(0, run.update)
        else:
            with w.timeline.span("controller", "eval"):
                row = {
                    "step": 0,
                    "weights/version": run.version,
                    **await eval_metrics(run.router, run.tokenizer, run.tasks, run.config, run.more_evals),
                }
            w.progress.evaluated(row)
            w.trackers.log(row, 0)


async def publish_and_load(run: Run) -> None:
    """The trainer's weights published and loaded (and proven) by every engine replica before it returns."""
    run.update = await run.trainer.publish_weights()
    run.proof = proof_metrics(run.update, await load_everywhere(run.router, run.stream, run.update))
    run.version = run.update.version


async def until_first_failure(producer: asyncio.Task, trainer: asyncio.Task) -> None:
    """Awaits the training side; a failure of the producer first cancels it and is raised."""
    await asyncio.wait([producer, trainer], return_when=asyncio.FIRST_COMPLETED)
    if not trainer.done():
        trainer.cancel()
        await asyncio.gather(trainer, return_exceptions=True)
        producer.result()  # raises the producer's failure
    trainer.result()


async def train_steps(run: Run) -> None:
    """The training side: steps first_step..run.steps, then the final model. A stop asked by a signal
    ends it at a step boundary, or by abandoning the step in flight (``stop_soon``), with a
    checkpoint of the last step done (``run.checkpoint_on_stop``)."""
    try:
        for step in range(run.first_step, run.config.run.steps + 1):
            if run.signals.asked:
                break
            run.step = step
            stops = await train_step(run, step)
            if stops:
                raise RunStopped(stop_reason(stops, run.config))
    except asyncio.CancelledError:
        if run.abandoned is None:
            raise
        asyncio.current_task().uncancel()
    if run.signals.asked:
        if run.abandoned in (None, "clean") and run.config.run.checkpoint_on_stop:
            await checkpoint_on_stop(run)
        return
    if run.background:
        await run.background.finish()
    with run.writers.timeline.span("controller", "checkpoint"):
        await run.trainer.save_checkpoint(str(run.run_dir / "final"), resumable=False)
    run.writers.progress.log(f"done in {time.perf_counter() - run.started:.0f}s: final model in {run.run_dir / 'final'}")


async def train_step(run: Run, step: int) -> list[Alert]:
    """One step: take the batch, train, publish (the engines load it while the next step trains),
    evaluate, checkpoint, log the row; returns the alerts that ask to stop the run."""
    c, w, t0 = run.config, run.writers, time.perf_counter()
    w.timeline.step = step
    dump_now = c.monitor.dump_every > 0 and step % c.monitor.dump_every == 0
    with w.timeline.span("controller", "wait_for_batch"):
        run.waiting = True
        groups, rollout_metrics = await unless_load_fails(take_batch(run.stream, run.plan(), partial(run.record, step=step)), run.loading)
        run.waiting = False
    generated, run.stream.generated_tokens = run.stream.generated_tokens, 0
    t1 = time.perf_counter()
    with w.timeline.span("controller", "train"):
        batch = await build_batch([g.episodes for g in groups], run.algorithm, run.tokenizer.pad_token_id, run.trainer, run.teacher_score)
        trained = await run.trainer.train_step(batch, keep_logprobs=dump_now)
    for stage, start, end in trained.spans:  # the trainer's own clock: time.time()
        w.timeline.add("trainer", stage, start, end)
    for group in groups:
        run.record(group, "trained", run.version, step)
    t2 = time.perf_counter()
    with w.timeline.span("controller", "sync"):
        paused = 0.0
        if run.loading:  # one version in flight at a time
            loaded = await run.loading
            run.proof, paused = proof_metrics(run.update, loaded), loaded.pause_s
        with w.timeline.span("trainer", "publish"):
            run.update = await run.trainer.publish_weights()
        run.version = run.update.version
        run.loading = asyncio.create_task(load_everywhere(run.router, run.stream, run.update), name="load-weights")  # during the next step
    t3 = time.perf_counter()
    if dump_now:
        rows = rollout_rows(step, c.task.name, groups, batch, trained.logprobs, run.tokenizer)
        await asyncio.to_thread(write_rollouts, dump_path(run.run_dir, step), rows)
    waited = rollout_metrics.pop("timing/wait_for_batch_s")
    seconds = {"wait_for_batch_s": waited, "train_s": t2 - t1, "sync_s": t3 - t2, "wait_for_weights_s": paused, "step_s": t3 - t0}
    episodes = [e for g in groups for e in g.episodes]
    row = step_metrics(step, episodes, seconds, generated, run.version) | rollout_metrics | trained.metrics | teacher_metrics(batch)
    row |= engine_counts(run.router) | run.proof
    stops = watch(run, step, row)
    await evaluate(run, step, row)
    if step % c.run.checkpoint_every == 0:
        with w.timeline.span("controller", "checkpoint"):
            await save_checkpoint(run.trainer, run.run_dir / "checkpoints" / f"step_{step}", stream_state(run.stream, step))
    row |= engine_counts(run.router)  # again: a replica that died in the step's eval or checkpoint counts in its row
    row["timing/elapsed_s"] = time.perf_counter() - run.started
    w.trackers.log(row, step)
    w.progress.step(row)
    run.completed, run.resume_state = step, stream_state(run.stream, step)
    return stops


def engine_counts(router: EngineRouter) -> dict[str, float]:
    """The replicas' counters so far: live, requests resubmitted after a death, replacements started."""
    return {"engines/live": router.live_count, "engines/resubmitted": router.resubmitted, "engines/restarts": router.restarts}


async def unless_load_fails(work: Coroutine[Any, Any, T], loading: asyncio.Task | None) -> T:
    """Awaits ``work``; a failure of ``loading`` (the engines loading the latest weights: a copy corrupt
    twice, a load past the stall limit) first cancels it and is raised."""
    task = asyncio.ensure_future(work)
    try:
        if loading is not None:
            await asyncio.wait([task, loading], return_when=asyncio.FIRST_COMPLETED)
            if not task.done() and not loading.cancelled() and loading.exception() is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                loading.result()
        return await task
    except asyncio.CancelledError:
        task.cancel()
        raise


def watch(run: Run, step: int, row: dict[str, float]) -> list[Alert]:
    """The step's alerts (invalid episodes, reward hacking, health rules) recorded; returns those that stop the run."""
    invalid = watch_invalid(step, row, run.config)
    hacking = [Alert(step, "hacking", text) for text in (run.pipeline.watch(step, row) if run.pipeline else [])]  # may raise to stop
    stop_invalid = invalid if run.config.rollout.stop_on_invalid else []
    return list(dict.fromkeys(run.writers.alerts.step(step, row, invalid + hacking) + stop_invalid))


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


async def evaluate(run: Run, step: int, row: dict[str, float]) -> None:
    """When due, evaluates this step's weights: in the background (while the next steps train), or
    here once the engines have loaded them (the metrics join ``row``)."""
    if not (step % run.config.eval.every == 0 or step == run.config.run.steps):
        return
    if run.background:
        await run.background.start(step, run.update)
        return
    with run.writers.timeline.span("controller", "eval"):
        await run.loading
        row |= await eval_metrics(run.router, run.tokenizer, run.tasks, run.config, run.more_evals)
    run.writers.progress.evaluated(row)


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


def proof_metrics(update: WeightUpdate, loaded: Loaded) -> dict[str, float]:
    """``weights/verified`` (1: every engine worker checked each tensor's digest; a failed check never
    returns) and ``weights/probe_gap`` (with a probe) of a version the engines loaded."""
    gap = {} if loaded.probe_gap is None else {"weights/probe_gap": loaded.probe_gap}
    return {"weights/verified": float(bool(update.digests))} | gap


async def load_everywhere(router: EngineRouter, stream: RolloutStream, update: WeightUpdate) -> Loaded:
    """Every engine loads ``update`` in flight, then the staleness gate widens; returns the pause and
    the probe's gap. NoProgress when the load takes rollout.stall_timeout_s seconds (an engine that never answers)."""
    loaded = await load_within_stall_limit(router, update, stream.config.rollout.stall_timeout_s)
    stream.serve(update.version)
    return loaded


def stream_state(stream: RolloutStream, step: int) -> dict:
    """The controller's state after ``step``: valid between a step's training and the next step taking its batch."""
    return {
        "step": step,
        "next_position": stream.next_position,
        "pending": stream.pending(),
        "accepted": stream.accepted - len(stream.queued),  # finished groups still queued will be re-admitted
    }


async def save_checkpoint(trainer: TrainerGroup, directory: Path, state: dict) -> None:
    """Trainer state first, controller state last: a checkpoint without controller.json is incomplete."""
    await trainer.save_checkpoint(str(directory))
    (directory / "controller.json").write_text(json.dumps(state))


def stop_soon(run: Run) -> None:
    """The first signal: the training side stops before its next step. A step waiting for its batch
    is abandoned now (the trainer still holds the last step done, so it can be checkpointed); one
    training is given half of run.stop_timeout_s to finish, then abandoned without a checkpoint."""
    if run.steps is None or run.steps.done():
        return
    if run.waiting:
        abandon(run, "clean")
        return
    step = run.step
    asyncio.get_running_loop().call_later(run.config.run.stop_timeout_s / 2, lambda: run.completed < step and abandon(run, "dirty"))


def abandon(run: Run, how: Literal["clean", "dirty", "at once"]) -> None:
    if run.steps is not None and not run.steps.done():
        run.abandoned = how
        run.steps.cancel()


def stop_now(run: Run, main: asyncio.Task) -> None:
    """A second signal: the step in flight (or a checkpoint being written) is abandoned, the run closes."""
    abandon(run, "at once")
    if run.abandoned != "at once":  # nothing left to abandon: setup, the first weights or close is under way
        run.abandoned = "at once"
        main.cancel()


async def checkpoint_on_stop(run: Run) -> None:
    """A checkpoint of the last step done, unless it has one or nothing was trained since the run (re)started."""
    directory = run.run_dir / "checkpoints" / f"step_{run.completed}"
    if run.completed < run.first_step or (directory / "controller.json").is_file():
        return
    with run.writers.timeline.span("controller", "checkpoint"):
        await save_checkpoint(run.trainer, directory, run.resume_state)


async def close(run: Run) -> None:
    """The shutdown order of the module docstring, up to the reward actors (the trainer, engines and
    Ray belong to ``train``)."""
    if run.loading:
        await asyncio.gather(run.loading, return_exceptions=True)
    leftover = run.stream.pending()
    await run.stream.stop()
    if run.stream.workers is not None:
        run.stream.workers.stop()
    hand_back = run.workers.hand_back
    await run.router.close(keep_serving=hand_back)
    if hand_back:  # the replicas serving now (replacements included) serve the next attempt
        run.workers.engines, run.workers.engine_restarts = untimed(run.router.engines), run.router.restarts
    if run.background:
        await run.background.close()
    for position in leftover:
        run.writers.dump(Group(position, []), "pending", run.version)
    run.writers.close()
    await run.reward_actors.stop()
