"""The rollout stream: prompts admitted behind the staleness gate, their groups generated and scored
on the engines, and the pure rule that picks a step's groups from what finished.

Staleness. Engines serve version v once the weights of step v are loaded (version 0: initial).
The gate admits a prompt only while accepted + running < (max_staleness + v + 1) * prompts_per_step,
where accepted counts finished groups not dropped (AReaL's rule: never start work that could only
end up too stale). A group is trained at step k on trainer weights k - 1; if its oldest token came
from a version below k - 1 - max_staleness it is dropped and counted, never trained on. With
max_staleness = 0 this is generate-then-train.

Invariants: every admitted prompt ends as exactly one trained group or one counted drop (stale,
invalid, uninformative), or is still pending when the run ends. Prompt i of the stream always samples
with the same seed. A failure anywhere on the rollout side (a group's coroutine, the admission task
itself) is raised to the consumer, never left to hang it.

No silent stall: the run stops with ``NoProgress`` (one sentence: the share of invalid episodes and the
first error) once ``rollout.stall_steps`` steps' worth of admitted groups in a row were dropped and none
trained, or when no group finishes for ``rollout.stall_timeout_s`` seconds (time with no live engine
replica not counted). A user function whose return has the wrong type (``UserFunctionBug``) stops the
run at its first call.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any, Literal, Protocol

import torch
from transformers import AutoTokenizer

from flywheel.algorithms.base import Algorithm
from flywheel.config import Config
from flywheel.config.schema import RolloutConfig
from flywheel.engines.base import Engine, Loaded
from flywheel.envs.base import Environment
from flywheel.envs.dataset import long_prompts, prompt_room
from flywheel.envs.dataset_files import DatasetFileError
from flywheel.envs.registry import make_env
from flywheel.rewards.faults import UserFunctionBug
from flywheel.rewards.pipeline import RewardPipeline
from flywheel.rollout.clock import GroupClock
from flywheel.rollout.group import EnvEpisode, episode_metrics, run_group
from flywheel.rollout.router import EngineRouter
from flywheel.timeline import Timeline
from flywheel.types import Task
from flywheel.weights.base import WeightUpdate

Fate = Literal["trained", "stale", "invalid", "uninformative"]


class NoProgress(RuntimeError):
    """The run trained nothing for rollout.stall_steps steps' worth of groups, or no group finished for
    rollout.stall_timeout_s seconds; the message is one sentence saying why."""


async def within_stall_limit(awaitable, limit_s: float, downtime_s: Callable[[], float], stalled: Callable[[], str]):
    """What ``awaitable`` returns; NoProgress(``stalled()``) once it has waited ``limit_s`` seconds, not counting
    time with no live engine replica (``downtime_s``, a running total). Cancelled then, or when the caller is."""
    task = asyncio.ensure_future(awaitable)
    end = time.monotonic() + limit_s - downtime_s()
    try:
        while not task.done():
            left = end + downtime_s() - time.monotonic()
            if left <= 0:
                raise NoProgress(stalled())
            await asyncio.wait([task], timeout=left)
        return task.result()
    finally:
        task.cancel()


async def load_within_stall_limit(router: EngineRouter, update: WeightUpdate, limit_s: float) -> Loaded:
    """``router.load_weights(update)`` (the longest pause, the largest probe gap); NoProgress when the replicas have not loaded it
    within ``limit_s`` seconds (rollout.stall_timeout_s; time with no live replica not counted)."""
    return await within_stall_limit(
        router.load_weights(update),
        limit_s,
        router.downtime_s,
        lambda: (
            f"the engines did not load weights version {update.version} in {limit_s:g} s: an engine that never answers; check the "
            "engines' logs, or raise rollout.stall_timeout_s"
        ),
    )


@dataclass
class Stall:
    """The groups dropped since the last one trained (stale, invalid, uninformative) and their episodes'
    faults; ``stalled`` once there are ``limit`` of them."""

    limit: int
    groups: int = 0
    stale: int = 0
    uninformative: int = 0
    episodes: int = 0
    invalid: int = 0
    first_error: str | None = None

    def update(self, group: Group, fate: Fate) -> None:
        if fate == "trained":
            self.groups = self.stale = self.uninformative = self.episodes = self.invalid = 0
            self.first_error = None
            return
        self.groups += 1
        self.stale += fate == "stale"
        self.uninformative += fate == "uninformative"
        self.episodes += len(group.episodes)
        bad = [e for e in group.episodes if not e.valid]
        self.invalid += len(bad)
        if bad and self.first_error is None:
            self.first_error = fault_text(bad[0])

    @property
    def stalled(self) -> bool:
        return self.groups >= self.limit

    def reason(self) -> str:
        share = self.invalid / max(self.episodes, 1)
        first = f" (first error: {self.first_error})" if self.first_error else ""
        return (
            f"no group was trained in the last {self.groups} admitted groups: {share:.0%} of their {self.episodes} episodes were invalid{first}, "
            f"{self.stale} groups too stale, {self.uninformative} uninformative; fix what fails (errors/ in the run directory holds the first "
            "tracebacks) or raise rollout.stall_steps"
        )


def fault_text(episode: EnvEpisode) -> str:
    """What made an invalid episode invalid, in a few words: its failure's message, or its reward."""
    if episode.failure is not None:
        return f"{episode.fault}: {episode.failure}"
    return f"{episode.fault}: reward {episode.reward!r}"


@lru_cache(maxsize=4)
def _epoch_order(num_tasks: int, epoch: int, seed: int) -> tuple[int, ...]:
    order = list(range(num_tasks))
    random.Random(f"{seed}-{epoch}").shuffle(order)
    return tuple(order)


def prompt_indices(num_tasks: int, start: int, count: int, seed: int) -> list[int]:
    """Positions start..start+count of an endless stream of task indices: one shuffle per epoch."""
    return [_epoch_order(num_tasks, p // num_tasks, seed)[p % num_tasks] for p in range(start, start + count)]


def group_seed(run_seed: int, position: int) -> int:
    """The sampling seed of the group of stream position ``position``."""
    return run_seed * 1_000_003 + position * 10_007


@dataclass(frozen=True)
class TaskSet:
    """Train and held-out eval tasks, and the environment that runs their episodes."""

    train: list[Task]
    eval: list[Task]
    env_factory: Callable[[], Environment]
    has_tools: bool = False  # whether tools/ metrics mean anything
    long_prompts: int = 0  # train tasks left out: their prompts leave too little of the model's context


@dataclass(frozen=True)
class Group:
    """The scored group of one prompt of the stream, and its reward metrics."""

    position: int
    episodes: list[EnvEpisode]
    metrics: dict[str, float] = field(default_factory=dict)
    notes: list[dict] = field(default_factory=list)  # per episode: sub_rewards (name -> value) and guard_flags, for rollout dumps

    @property
    def oldest_version(self) -> int:
        """Of its tokens (an episode that ended before its first turn has none)."""
        return min((e.completion.weight_version for e in self.episodes if e.completion.token_ids), default=2**62)

    @property
    def valid_rewards(self) -> list[float]:
        return [e.reward for e in self.episodes if e.valid]


def load_tasks(config: Config) -> TaskSet:
    """The environment's train and held-out splits: its own ``splits`` when it has one, else eval
    tasks from another seed, minus any train prompt."""
    t = config.task
    factory = partial(make_env, t.name, **t.env_kwargs())
    env = factory()
    if t.dataset is not None:
        return fitting(TaskSet(*env.splits(t.train_size, t.eval_size, t.seed), factory, bool(env.tools)), config)
    if hasattr(env, "splits"):
        return TaskSet(*env.splits(t.train_size, t.eval_size, t.seed), factory, bool(env.tools))
    train = env.tasks(t.train_size, t.seed)
    seen = {task.prompt for task in train}
    return TaskSet(train, [task for task in env.tasks(t.eval_size, t.seed + 1) if task.prompt not in seen], factory, bool(env.tools))


def fitting(tasks: TaskSet, config: Config) -> TaskSet:
    """``tasks`` without those whose prompt leaves less than rollout.max_new_tokens of the model's context
    (vLLM would refuse them), counted, with a line on stderr when there are some."""
    room = prompt_room(config.model.path, config.rollout.max_new_tokens)
    if room is None:
        return tasks
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    long_train, long_eval = (set(long_prompts(split, tokenizer, config.task.system_prompt, room)) for split in (tasks.train, tasks.eval))
    if not long_train and not long_eval:
        return tasks
    print(
        f"flywheel: skipped {len(long_train)} train and {len(long_eval)} eval rows of task.dataset whose prompts are longer than the model's "
        f"context leaves room for ({room} tokens: max_position_embeddings minus rollout.max_new_tokens)",
        file=sys.stderr,
        flush=True,
    )
    train = [t for i, t in enumerate(tasks.train) if i not in long_train]
    if not train:
        raise DatasetFileError(
            f"every row of task.dataset '{config.task.dataset}' is longer than the model's context leaves room for ({room} tokens)"
        )
    return replace(tasks, train=train, eval=[t for i, t in enumerate(tasks.eval) if i not in long_eval], long_prompts=len(long_train))


def admission_room(accepted: int, running: int, version: int, max_staleness: int, batch_size: int) -> int:
    """How many more prompts may start: (max_staleness + version + 1) * batch_size - accepted - running."""
    return (max_staleness + version + 1) * batch_size - accepted - running


def too_stale(oldest_version: int, trainer_version: int, max_staleness: int) -> bool:
    return trainer_version - oldest_version > max_staleness


@dataclass
class BatchPlan:
    """Which finished groups a step trains on, decided one arrival at a time (no I/O).

    A group is dropped when too stale, when fewer than ``min_valid`` of its episodes are valid, or when
    the algorithm does not keep it (dynamic sampling). Stale and invalid groups are replaced without
    limit; uninformative ones until ``wanted * rounds`` groups were examined. If none was kept by then,
    the last ``wanted`` uninformative groups are trained on as they are (zero advantage, zero gradient).
    """

    wanted: int
    rounds: int
    trainer_version: int
    max_staleness: int
    min_valid: int
    keep_group: Callable[[list[float]], bool]
    kept: list[Group] = field(default_factory=list)
    uninformative: list[Group] = field(default_factory=list)
    stale: int = 0
    invalid: int = 0
    episodes: int = 0  # of every group offered
    errors: Counter = field(default_factory=Counter)  # error kind -> episodes of every group offered

    def offer(self, group: Group) -> Fate:
        self.episodes += len(group.episodes)
        self.errors.update(e.fault for e in group.episodes if not e.valid)
        if too_stale(group.oldest_version, self.trainer_version, self.max_staleness):
            self.stale += 1
            return "stale"
        if len(group.valid_rewards) < self.min_valid:
            self.invalid += 1
            return "invalid"
        if not self.keep_group(group.valid_rewards):
            self.uninformative.append(group)
            return "uninformative"
        self.kept.append(group)
        return "trained"

    @property
    def complete(self) -> bool:
        return len(self.kept) >= self.wanted or len(self.kept) + len(self.uninformative) >= self.wanted * self.rounds

    def result(self) -> tuple[list[Group], list[Group]]:
        """(groups to train on, sorted by stream position; uninformative groups dropped)."""
        kept, dropped = self.kept, self.uninformative
        if not kept:
            kept, dropped = dropped[-self.wanted :], dropped[: -self.wanted]
        return sorted(kept, key=lambda g: g.position), dropped


#: a timeline span measured where a group was made: (actor, stage, start, end), ``time.time()`` stamps
Span = tuple[str, str, float, float]


class GroupWorkers(Protocol):
    """Where groups are made off the driver (rollout/worker.py's rollout workers); ``restarts``: workers
    restarted in place of dead ones."""

    restarts: int

    async def group(self, position: int, router: EngineRouter) -> tuple[Group, list[Span]]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class GroupMaker:
    """How the group of a stream position is made (in the driver, or in a rollout worker): its task, its
    episodes on ``engine``, their scores and the algorithm's shaping."""

    tokenizer: Any
    tasks: TaskSet
    algorithm: Algorithm
    pipeline: RewardPipeline | None
    rollout: RolloutConfig
    run_seed: int

    async def make(
        self, position: int, engine: Engine, downtime: Callable[[], float] | None = None, engine_name: str | None = None
    ) -> tuple[Group, list[Span]]:
        """The scored group of the prompt at ``position`` and its spans (environment steps between the
        engine calls, scoring; with ``engine_name``, the engine calls too). A grader that returned the
        wrong type raises ``UserFunctionBug``: a bug, not a bad episode."""
        r, seed = self.rollout, group_seed(self.run_seed, position)
        [index] = prompt_indices(len(self.tasks.train), position, 1, self.run_seed)
        task = self.tasks.train[index]
        clock = GroupClock(engine)
        episodes = await run_group(clock, self.tokenizer, self.tasks.env_factory, task, r.group_size, r.temperature, r.max_new_tokens, seed, downtime)
        spans: list[Span] = [("env", "steps", start, end) for start, end in clock.gaps(time.time())]
        spans += [(engine_name, "generate", start, end) for start, end in clock.calls] if engine_name else []
        started = time.time()
        scored, reward_metrics, notes = await score_group(episodes, task, self.algorithm, self.pipeline, r.max_new_tokens)
        spans.append(("reward", "scoring", started, time.time()))
        for episode in scored:
            if isinstance(bug := getattr(episode.failure, "__cause__", None), UserFunctionBug):
                raise bug
        return Group(position, scored, episode_metrics(scored, self.tasks.has_tools) | reward_metrics, notes), spans


class RolloutStream:
    """The rollout side: admits prompts of the stream while the staleness gate has room, generates
    and scores their groups on the engines, and queues them finished (failures are queued too, and
    raised to the consumer)."""

    def __init__(
        self,
        router: EngineRouter,
        tokenizer,
        tasks: TaskSet,
        config: Config,
        state: dict,
        algorithm: Algorithm,
        pipeline: RewardPipeline | None,
        workers: GroupWorkers | None = None,
    ) -> None:
        self.router, self.tokenizer, self.tasks, self.config = router, tokenizer, tasks, config
        self.maker = GroupMaker(tokenizer, tasks, algorithm, pipeline, config.rollout, config.run.seed)
        self.workers = workers  # rollout workers that make the groups (None: made here)
        self.version = 0  # the version the engines serve: set by serve()
        self.accepted = state["accepted"]
        self.next_position = state["next_position"]
        self.readmit = deque(state["pending"])  # admitted before a resume, never finished
        self.running: dict[int, asyncio.Task] = {}
        self.admitted_at: dict[int, float] = {}  # position -> when it was admitted (loop time), until its group is taken
        self.finished: asyncio.Queue[Group | BaseException] = asyncio.Queue()
        self.queued: set[int] = set()  # positions of the finished groups in the queue
        self.room_changed = asyncio.Event()
        self.generated_tokens = 0
        self.timeline = Timeline(None)  # env and reward spans (the controller sets the run's)
        r = config.rollout
        self.stall = Stall(r.stall_steps * r.prompts_per_step * algorithm.sampling_rounds)  # steps' worth of groups
        self._producer: asyncio.Task | None = None

    def start(self) -> asyncio.Task:
        """Starts admitting; returns the admission task (the producer)."""
        self._producer = asyncio.create_task(self._admit_forever(), name="rollout-admission")
        self._producer.add_done_callback(self._producer_ended)
        return self._producer

    def _producer_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.finished.put_nowait(task.exception())

    def room(self) -> int:
        r = self.config.rollout
        return admission_room(self.accepted, len(self.running), self.version, r.max_staleness, r.prompts_per_step)

    async def _admit_forever(self) -> None:
        while True:
            while self.room() <= 0:
                self.room_changed.clear()
                await self.room_changed.wait()
            if self.readmit:
                position = self.readmit.popleft()
            else:
                position, self.next_position = self.next_position, self.next_position + 1
            self.admitted_at[position] = asyncio.get_running_loop().time()
            self.running[position] = asyncio.create_task(self._generate(position), name=f"group-{position}")

    async def _generate(self, position: int) -> None:
        try:
            group = await self._group(position)
        except Exception as error:  # raised again by next_group
            self.admitted_at.pop(position, None)
            self.finished.put_nowait(error)
            return
        finally:
            del self.running[position]
            self.router.release(position)
        self.accepted += 1
        self.generated_tokens += sum(len(e.completion.token_ids) for e in group.episodes)
        self.queued.add(position)
        self.finished.put_nowait(group)

    async def _group(self, position: int) -> Group:
        """The scored group of the prompt at ``position``: made in a rollout worker, or here, every turn on
        one replica (its prefix cache holds the earlier turns)."""
        if self.workers is not None:
            group, spans = await self.workers.group(position, self.router)
        else:
            group, spans = await self.maker.make(position, self.router.pinned(position), self.router.downtime_s)
        for span in spans:
            self.timeline.add(*span)
        return group

    async def next_group(self) -> Group:
        """The next finished group; NoProgress when none finishes within rollout.stall_timeout_s seconds
        (not counting time with no live engine replica)."""
        limit = self.config.rollout.stall_timeout_s
        item = await within_stall_limit(
            self.finished.get(),
            limit,
            self.router.downtime_s,
            lambda: (
                f"no group finished in {limit:g} s ({len(self.running)} running): an engine that never answers, or an environment "
                "that never returns; check the engines' logs, or raise rollout.stall_timeout_s"
            ),
        )
        if isinstance(item, BaseException):
            raise item
        self.queued.discard(item.position)
        return item

    def release(self, count: int = 1) -> None:
        """Dropped groups give their places back to the gate."""
        self.accepted -= count
        self.room_changed.set()

    def serve(self, version: int) -> None:
        """The engines now serve ``version``: the gate widens."""
        self.version = version
        self.room_changed.set()

    def pending(self) -> list[int]:
        """Positions admitted and not yet consumed: running, finished in the queue, or awaiting re-admission."""
        return sorted([*self.running, *self.queued, *self.readmit])

    async def stop(self) -> None:
        tasks = [t for t in [self._producer, *self.running.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def task_record(task: Task, episode: EnvEpisode) -> dict:
    """What the reward pipeline knows of an episode's task: prompt, reference answer, metadata, the
    environment's own grade, the model's turns (never the environment's text) and the ids of the
    model's tokens (``completion_ids``)."""
    completion = episode.completion
    mask = completion.loss_mask or (1,) * len(completion.token_ids)
    ids = [t for t, m in zip(completion.token_ids, mask) if m]
    return {
        "prompt": task.prompt,
        "answer": task.answer,
        **task.metadata,
        "reward": episode.reward,
        "model_turns": episode.model_turns,
        "completion_ids": ids,
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


async def score_group(
    episodes: list[EnvEpisode], task: Task, algorithm: Algorithm, pipeline: RewardPipeline | None, max_tokens: int
) -> tuple[list[EnvEpisode], dict[str, float], list[dict]]:
    """The group's final rewards and reward metrics: the environment's grade (or the reward pipeline's
    total, which sees the last model turn), then the algorithm's shaping of the model's turn lengths.
    An episode whose reward is not finite is marked ``nonfinite_reward``, one whose scoring failed by its
    fault (``reward_error``, ``reward_timeout``): both are left out of the advantages. Also per episode:
    its sub-rewards (``env``: the environment's grade; ``pipeline``: the pipeline's total) and the guards
    that flagged it."""
    rewards, metrics, faults = [e.reward for e in episodes], {}, [None] * len(episodes)
    notes = [{"sub_rewards": {"env": e.reward}, "guard_flags": []} for e in episodes]
    if pipeline is not None:
        result = await pipeline.score([(e.model_turns or [""])[-1] for e in episodes], [task_record(task, e) for e in episodes])
        rewards, metrics, faults = result.rewards, result.metrics, result.faults or faults
        for note, total, reasons in zip(notes, result.rewards, result.reasons):
            note["sub_rewards"]["pipeline"], note["guard_flags"] = total, list(reasons)
    lengths = torch.tensor([max(e.turn_lengths, default=0) for e in episodes])
    shaped = algorithm.shape_rewards(torch.tensor(rewards, dtype=torch.float), lengths, max_tokens).tolist()
    scored = [e if _same_float(x, e.reward) else replace(e, reward=x, error=e.error or _nonfinite(x)) for e, x in zip(episodes, shaped)]
    # a scoring fault names why the reward is missing (or not finite), unless the environment failed first
    scored = [s if f is None or e.error else replace(s, error=f.reason, failure=f) for e, s, f in zip(episodes, scored, faults)]
    return scored, metrics, notes


def _same_float(x: float, y: float) -> bool:
    """Whether ``x`` is ``y`` to the bit, as a finite float: then the episode keeps its reward and its
    ``error``, and needs no copy."""
    return type(y) is float and math.isfinite(x) and x == y and math.copysign(1.0, x) == math.copysign(1.0, y)


def _nonfinite(x: float) -> str | None:
    return None if math.isfinite(x) else "nonfinite_reward"


async def take_batch(stream: RolloutStream, plan: BatchPlan, dump: Callable[[Group, Fate, int], None]) -> tuple[list[Group], dict[str, float]]:
    """The groups of the step, taken from the stream as ``plan`` decides; dropped groups give their
    places back to the gate."""
    waited, admitted = 0.0, {}
    loop = asyncio.get_running_loop()
    while not plan.complete:
        started = loop.time()
        group = await stream.next_group()
        waited += loop.time() - started
        admitted[group.position] = stream.admitted_at.pop(group.position, started)
        fate = plan.offer(group)
        if fate != "trained":
            stream.release()
        if fate in ("stale", "invalid"):
            dump(group, fate, plan.trainer_version)
        stream.stall.update(group, fate)
        if stream.stall.stalled:
            raise NoProgress(stream.stall.reason())
    kept, dropped = plan.result()
    if not plan.kept:  # trained on uninformative groups after all: they count as accepted again
        stream.release(-len(kept))
    for group in dropped:
        dump(group, "uninformative", plan.trainer_version)
    ages = [loop.time() - admitted[g.position] for g in kept] or [0.0]  # admission to the start of its training
    staleness = [plan.trainer_version - e.completion.weight_version for g in kept for e in g.episodes if e.completion.token_ids] or [0]
    keys = set().union(*(g.metrics for g in kept))  # groups are equal-sized: the mean of means is the mean
    # over the groups that report it (a TRL function returning None for a whole group reports nothing)
    metrics = {key: _mean([g.metrics[key] for g in kept if key in g.metrics]) for key in sorted(keys)} | {
        "rollout/dropped_stale": plan.stale,
        "rollout/dropped_invalid_groups": plan.invalid,
        "rollout/invalid_frac": sum(plan.errors.values()) / plan.episodes,
        "env/errors": plan.errors["env_error"],
        "env/timeouts": plan.errors["env_timeout"],
        "reward/nonfinite": plan.errors["nonfinite_reward"],
        "reward/errors": plan.errors["reward_error"],
        "reward/timeouts": plan.errors["reward_timeout"],
        "rollout/dropped_uninformative": len(dropped),
        "rollout/long_prompts_skipped": stream.tasks.long_prompts,
        "rollout/worker_restarts": stream.workers.restarts if stream.workers is not None else 0,
        "rollout/staleness_mean": sum(staleness) / len(staleness),
        "rollout/staleness_max": max(staleness),
        "rollout/group_age_s_mean": sum(ages) / len(ages),
        "rollout/group_age_s_max": max(ages),
        "timing/wait_for_batch_s": waited,
    }
    return kept, metrics
