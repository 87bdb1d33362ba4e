"""The RL loop: rollout and training joined by a bounded buffer; synchronous when max_staleness = 0.

    rollout side (RolloutStream): while the staleness gate has room, admit the next prompt of the
        stream and generate its group on an engine replica (EngineRouter: least outstanding work,
        failover); score it; queue it as finished.
    training side (train, one step after the other): take prompts_per_step finished groups (drop
        and count stale ones and, with dynamic sampling, uninformative ones) -> advantages
        -> trainer.train_step -> publish weights -> every engine loads them in flight, while the
        next step already trains (one version loading at a time) -> evaluate / checkpoint.

Staleness. Engines serve version v once the weights of step v are loaded (version 0: initial).
The gate admits a prompt only while accepted + running < (max_staleness + v + 1) * prompts_per_step,
where accepted counts finished groups not dropped (AReaL's rule: never start work that could only
end up too stale). A group is trained at step k on trainer weights k - 1; if its oldest token came
from a version below k - 1 - max_staleness it is dropped and counted (async/dropped_stale), never
trained on. With max_staleness = 0 this is generate-then-train: the prompts of step k are admitted
only once version k - 1 is loaded, so every token of step k comes from version k - 1.

Invariants: every admitted prompt ends as exactly one trained group or one counted drop, or is
still pending when the run ends (a checkpoint records the pending prompts; a resume re-admits them
first). A replica that dies has its requests resubmitted to another one. Prompt i of the stream
always samples with the same seed, so a run with max_staleness = 0 is reproducible and resumable
exactly.
Rewards: the exact answer, or the configured pipeline (exact answer + LLM judge + reward model, then
the hacking guards, whose rates feed an alert that can stop the run), scored as each group finishes.
Shutdown order: progress bar, rollout tasks, metrics file, reward model, trainer (removes its
shared-memory weights), engines, then Ray if this loop started it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path

import ray
import torch
from transformers import AutoTokenizer

from flywheel.algorithms.dapo import informative_groups, overlong_penalty
from flywheel.algorithms.gae import gae_advantages, masked_whiten, terminal_rewards
from flywheel.algorithms.select import sequence_advantages
from flywheel.config import Config, dump_config
from flywheel.engines import engine_class
from flywheel.engines.base import Engine
from flywheel.engines.remote import RemoteEngine
from flywheel.envs.arithmetic import Problem, make_splits
from flywheel.envs.base import Environment, Task
from flywheel.envs.registry import make_env
from flywheel.envs.rollout import episode_metrics, run_group
from flywheel.monitor.metrics import MetricsLog, read_metrics
from flywheel.monitor.progress import RunProgress
from flywheel.rewards.exact import exact_match_reward
from flywheel.rewards.judge import EngineBackend, Judge
from flywheel.rewards.pipeline import RewardPipeline, Scorer, reward_model_scorer
from flywheel.rollout.router import EngineRouter
from flywheel.types import Completion, Episode, TrainBatch, collate
from flywheel.weights import open_transport
from flywheel.weights.base import WeightTransport, WeightUpdate


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


@lru_cache(maxsize=4)
def _epoch_order(num_problems: int, epoch: int, seed: int) -> tuple[int, ...]:
    order = list(range(num_problems))
    random.Random(f"{seed}-{epoch}").shuffle(order)
    return tuple(order)


def prompt_indices(num_problems: int, start: int, count: int, seed: int) -> list[int]:
    """Positions start..start+count of an endless stream of problem indices: one shuffle per epoch."""
    return [_epoch_order(num_problems, p // num_problems, seed)[p % num_problems] for p in range(start, start + count)]


def group_seed(run_seed: int, position: int) -> int:
    """The sampling seed of the group of stream position ``position``."""
    return run_seed * 1_000_003 + position * 10_007


@dataclass(frozen=True)
class TaskSet:
    """Train and held-out eval problems (each with a ``prompt`` and an ``answer``), and the
    environment that runs their episodes (None: 'addition', one turn graded by the exact answer)."""

    train: list[Problem] | list[Task]
    eval: list[Problem] | list[Task]
    env_factory: Callable[[], Environment] | None


def load_tasks(config: Config) -> TaskSet:
    """The task's splits: an environment's eval tasks come from another seed, minus any train prompt."""
    t = config.task
    if t.name == "addition":
        return TaskSet(*make_splits(t.seed, t.digits, t.train_size, t.eval_size), None)
    factory = partial(make_env, t.name, **t.env_args)
    train = factory().tasks(t.train_size, t.seed)
    seen = {task.prompt for task in train}
    return TaskSet(train, [task for task in factory().tasks(t.eval_size, t.seed + 1) if task.prompt not in seen], factory)


def task_scores(completions: list[str], tasks: list[dict]) -> tuple[list[float], dict[str, float]]:
    """The task's own grade, computed before the pipeline (exact answer, environment reward)."""
    return [t["reward"] for t in tasks], {}


def reward_pipeline(config: Config, policy_engine: Engine) -> tuple[RewardPipeline | None, Callable[[], None]]:
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

    if not (r.guards or r.judge.enabled or r.reward_model.path):
        return None, stop
    scorers, judge = [Scorer("task", task_scores)], None
    if r.reward_model.path:
        from flywheel.rewards.reward_model import RewardModel

        rm = r.reward_model
        model = ray.remote(RewardModel).options(num_cpus=0).remote(rm.path, batch_size=rm.batch_size, max_length=rm.max_length, threads=1)
        scorers.append(reward_model_scorer(lambda texts: ray.get(model.score.remote(texts)), rm.weight))
        models.append(model)
    if r.judge.enabled and r.judge.engine != "endpoint":  # a vLLM engine in the run; it cannot constrain output
        if r.judge.engine == "own":
            judge_config = config.model_copy(update={"model": config.model.model_copy(update={"path": r.judge.model_path}), "rollout": config.rollout.model_copy(update={"engines": 1})})
            engines += start_engines(judge_config, cpus=0)
        engine = engines[0] if r.judge.engine == "own" else policy_engine
        path = r.judge.model_path if r.judge.engine == "own" else config.model.path
        judge = Judge(EngineBackend(engine, path, max_tokens=r.judge.max_tokens, seed=config.run.seed), structured=False)
    return RewardPipeline.from_config(r, rubric=None, scorers=scorers, judge=judge), stop


def grade(episodes: list[Episode], task_rewards: list[float], problem: Problem | Task, config: Config, pipeline: RewardPipeline | None) -> tuple[list[Episode], dict[str, float]]:
    """The group's final rewards and reward metrics: the task's grade (or the reward pipeline's
    total), plus, when ``algorithm.overlong_buffer`` is set, DAPO's overlong shaping of the length."""
    r, a = config.rollout, config.algorithm
    rewards, metrics = torch.tensor(task_rewards, dtype=torch.float), {}
    if pipeline is not None:
        tasks = [{"prompt": problem.prompt, "answer": problem.answer, "reward": x} for x in task_rewards]
        result = pipeline.score([e.completion.text for e in episodes], tasks)
        rewards, metrics = torch.tensor(result.rewards, dtype=torch.float), result.metrics
    if a.overlong_buffer:
        lengths = torch.tensor([len(e.completion.token_ids) for e in episodes])
        rewards += overlong_penalty(lengths, r.max_new_tokens, a.overlong_buffer, a.overlong_penalty)
    return [replace(e, reward=reward.item()) for e, reward in zip(episodes, rewards)], metrics


def addition_episodes(prompt: list[int], problem: Problem, completions: list[Completion]) -> tuple[list[Episode], list[float]]:
    """An addition group's episodes (rewards still 0) and their exact-answer grades."""
    return [Episode(prompt, c, 0.0) for c in completions], [exact_match_reward(c.text, problem.answer) for c in completions]


def score_group(prompt: list[int], problem: Problem, completions: list[Completion], config: Config) -> list[Episode]:
    """An addition group graded by the exact answer (and overlong shaping): for tests and benchmarks."""
    return grade(*addition_episodes(prompt, problem, completions), problem, config, None)[0]


def rollout(workers: Workers, tokenizer, problems: list[Problem], config: Config, seed: int) -> list[list[Episode]]:
    """group_size scored completions of each problem on the first engine (problem i samples with
    seed + i): a blocking helper for tests and benchmarks."""
    r = config.rollout
    prompts = [tokenizer.encode(p.prompt) for p in problems]
    generated = asyncio.run(workers.engines[0].generate(prompts, r.group_size, r.temperature, r.max_new_tokens, seed))
    return [score_group(prompt, problem, completions, config) for prompt, problem, completions in zip(prompts, problems, generated)]


@dataclass(frozen=True)
class Group:
    """The scored group of one prompt of the stream, and its reward metrics."""

    position: int
    episodes: list[Episode]
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def oldest_version(self) -> int:
        """Of its tokens (an episode that ended before its first turn has none)."""
        return min((e.completion.weight_version for e in self.episodes if e.completion.token_ids), default=2**62)


def admission_room(accepted: int, running: int, version: int, max_staleness: int, batch_size: int) -> int:
    """How many more prompts may start: (max_staleness + version + 1) * batch_size - accepted - running."""
    return (max_staleness + version + 1) * batch_size - accepted - running


def too_stale(oldest_version: int, trainer_version: int, max_staleness: int) -> bool:
    return trainer_version - oldest_version > max_staleness


class RolloutStream:
    """The rollout side: admits prompts of the stream while the staleness gate has room, generates
    and scores their groups on the engines, and queues them finished (failures are queued too, and
    raised to the consumer)."""

    def __init__(self, router: EngineRouter, tokenizer, tasks: TaskSet, config: Config, state: dict, pipeline: RewardPipeline | None) -> None:
        self.router, self.tokenizer, self.tasks, self.config, self.pipeline = router, tokenizer, tasks, config, pipeline
        self.version = 0  # the version the engines serve: set by serve()
        self.accepted = state["accepted"]
        self.next_position = state["next_position"]
        self.readmit = deque(state["pending"])  # admitted before a resume, never finished
        self.running: dict[int, asyncio.Task] = {}
        self.finished: asyncio.Queue[Group | BaseException] = asyncio.Queue()
        self.queued: set[int] = set()  # positions of the finished groups in the queue
        self.room_changed = asyncio.Event()
        self.generated_tokens = 0
        self._producer: asyncio.Task | None = None

    def start(self) -> None:
        self._producer = asyncio.create_task(self._admit_forever())

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
            self.running[position] = asyncio.create_task(self._generate(position))

    async def _generate(self, position: int) -> None:
        try:
            group = Group(position, *await self._group(position))
        except Exception as error:  # raised again by next_group
            self.finished.put_nowait(error)
            return
        finally:
            del self.running[position]
            self.router.release(position)
        self.accepted += 1
        self.generated_tokens += sum(len(e.completion.token_ids) for e in group.episodes)
        self.queued.add(position)
        self.finished.put_nowait(group)

    async def _group(self, position: int) -> tuple[list[Episode], dict[str, float]]:
        """The graded episodes of the prompt at ``position`` and their metrics."""
        r, seed = self.config.rollout, group_seed(self.config.run.seed, position)
        [index] = prompt_indices(len(self.tasks.train), position, 1, self.config.run.seed)
        problem = self.tasks.train[index]
        if self.tasks.env_factory is None:
            prompt = self.tokenizer.encode(problem.prompt)
            [completions] = await self.router.generate([prompt], r.group_size, r.temperature, r.max_new_tokens, seed, key=position)
            (episodes, task_rewards), metrics = addition_episodes(prompt, problem, completions), {}
        else:  # every turn of the group on one replica (its prefix cache holds the earlier turns)
            episodes = await run_group(self.router.pinned(position), self.tokenizer, self.tasks.env_factory, problem, r.group_size, r.temperature, r.max_new_tokens, seed)
            task_rewards, metrics = [e.reward for e in episodes], episode_metrics(episodes)
        if self.pipeline is None:
            graded, reward_metrics = grade(episodes, task_rewards, problem, self.config, None)
        else:  # judges and reward models block: off the event loop
            graded, reward_metrics = await asyncio.to_thread(grade, episodes, task_rewards, problem, self.config, self.pipeline)
        return graded, metrics | reward_metrics

    async def next_group(self) -> Group:
        item = await self.finished.get()
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


async def take_batch(stream: RolloutStream, trainer_version: int, config: Config, dump) -> tuple[list[Group], dict[str, float]]:
    """The groups of the step trained on weights ``trainer_version``, sorted by stream position.

    Stale groups are dropped (``async/dropped_stale``). With DAPO's dynamic sampling, groups whose
    rewards are all equal are dropped too (``sampling/dropped_groups``) and replaced, up to
    ``algorithm.max_sampling_rounds * prompts_per_step`` groups examined; if none was informative
    by then, the last uninformative ones are trained on as they are (zero advantage, zero gradient).
    """
    a, wanted = config.algorithm, config.rollout.prompts_per_step
    limit = wanted * (a.max_sampling_rounds if a.dynamic_sampling else 1)
    kept: list[Group] = []
    uninformative: list[Group] = []
    stale, waited = 0, 0.0
    while len(kept) < wanted and len(kept) + len(uninformative) < limit:
        started = time.perf_counter()
        group = await stream.next_group()
        waited += time.perf_counter() - started
        if too_stale(group.oldest_version, trainer_version, config.rollout.max_staleness):
            stale += 1
            stream.release()
            dump(group, "stale", trainer_version)
        elif a.dynamic_sampling and not informative_groups(torch.tensor([[e.reward for e in group.episodes]]))[0]:
            uninformative.append(group)
            stream.release()
        else:
            kept.append(group)
    if not kept:  # nothing informative: train on the last uninformative groups (zero gradient)
        kept, uninformative = uninformative[-wanted:], uninformative[:-wanted]
        stream.release(-len(kept))
    for group in uninformative:
        dump(group, "uninformative", trainer_version)
    kept.sort(key=lambda g: g.position)
    staleness = [trainer_version - e.completion.weight_version for g in kept for e in g.episodes if e.completion.token_ids] or [0]
    reward_keys = set().union(*(g.metrics for g in kept))  # groups are equal-sized: the mean of means is the mean
    metrics = {key: sum(g.metrics.get(key, 0.0) for g in kept) / len(kept) for key in sorted(reward_keys)} | {
        "async/dropped_stale": stale,
        "sampling/dropped_groups": len(uninformative),
        "staleness/mean": sum(staleness) / len(staleness),
        "staleness/max": max(staleness),
        "timing/wait_for_batch_s": waited,
    }
    return kept, metrics


async def build_batch(groups: list[list[Episode]], config: Config, pad_id: int, trainer: ray.actor.ActorHandle) -> TrainBatch:
    """Collates the groups and fills in advantages (and critic returns for GAE)."""
    a = config.algorithm
    episodes = [e for group in groups for e in group]
    batch = collate(episodes, pad_id)
    rewards = torch.tensor([[e.reward for e in group] for group in groups])
    if a.kl_beta > 0 and a.kl_placement == "reward":
        rewards = rewards - a.kl_beta * (await trainer.sequence_kl.remote(batch)).view_as(rewards)
    mask = batch.loss_mask
    returns = None
    if a.advantage == "gae":
        values = await trainer.values.remote(batch)
        advantages, returns = gae_advantages(terminal_rewards(rewards.flatten(), mask), values, mask, a.gamma, a.lam)
        advantages = masked_whiten(advantages, mask)
    else:
        advantages = sequence_advantages(a)(rewards).flatten()[:, None] * mask
    if a.overlong_filter:
        mask = mask * torch.tensor([not e.completion.truncated for e in episodes])[:, None]
    return replace(batch, loss_mask=mask, advantages=advantages, returns=returns)


async def evaluate(router: EngineRouter, tokenizer, tasks: TaskSet, temperature: float, config: Config) -> dict[str, float]:
    """One episode of every held-out problem: accuracy (mean reward: 1 for an exact answer) and,
    for an environment, its tool and turn metrics. Same seed every time."""
    seed, max_tokens = config.run.seed, config.rollout.max_new_tokens
    if tasks.env_factory is None:
        prompts = [tokenizer.encode(p.prompt) for p in tasks.eval]
        groups = await router.generate(prompts, 1, temperature, max_tokens, seed)
        return {"accuracy": sum(exact_match_reward(g[0].text, p.answer) for g, p in zip(groups, tasks.eval)) / len(tasks.eval)}
    runs = (run_group(router, tokenizer, tasks.env_factory, task, 1, temperature, max_tokens, seed + k) for k, task in enumerate(tasks.eval))
    episodes = [e for group in await asyncio.gather(*runs) for e in group]
    return {"accuracy": sum(e.reward for e in episodes) / len(episodes)} | episode_metrics(episodes)


async def eval_metrics(router: EngineRouter, tokenizer, tasks: TaskSet, config: Config) -> dict[str, float]:
    """eval/... at the eval temperature and, if asked, eval/greedy_accuracy (temperature 0)."""
    metrics = {f"eval/{key}": value for key, value in (await evaluate(router, tokenizer, tasks, config.eval.temperature, config)).items()}
    if config.eval.greedy:
        metrics["eval/greedy_accuracy"] = (await evaluate(router, tokenizer, tasks, 0.0, config))["accuracy"]
    return metrics


def step_metrics(step: int, episodes: list[Episode], seconds: dict[str, float], generated_tokens: int, version: int) -> dict[str, float]:
    """The rollout-side metrics of one step. seconds: wait_for_batch (trainer starved), train,
    sync (publishing, after the previous version's load), wait_for_weights (engines paused by the
    previous load), step."""
    tokens = sum(len(e.completion.token_ids) for e in episodes)
    return {
        "step": step,
        "reward/mean": sum(e.reward for e in episodes) / len(episodes),
        "response_length/mean": tokens / len(episodes),
        "response_length/truncated_frac": sum(e.completion.truncated for e in episodes) / len(episodes),
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


async def _train(config: Config, workers: Workers) -> Path:
    if config.run.resume:
        run_dir = Path(config.run.resume)
        checkpoint, state = latest_checkpoint(run_dir)
        first_step = state["step"] + 1
    else:
        run_dir, checkpoint, first_step = new_run_dir(config), None, 1
        state = {"next_position": 0, "pending": [], "accepted": 0}
        (run_dir / "config.yaml").write_text(dump_config(config))
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks = load_tasks(config)
    trainer, router = workers.trainer, EngineRouter(workers.engines)
    pipeline, stop_reward_actors = reward_pipeline(config, workers.engines[0])
    metrics_path = run_dir / "metrics.jsonl"
    dump_path = run_dir / "rollouts.jsonl"
    if checkpoint is not None:  # what came after the checkpoint is done again
        await trainer.restore.remote(str(checkpoint))
        kept = [row for row in read_metrics(metrics_path) if row["step"] < first_step]
        metrics_path.write_text("".join(json.dumps(row) + "\n" for row in kept))
        if dump_path.is_file():  # a group trained at step k was trained on version k - 1
            fates = [row for row in read_metrics(dump_path) if row["fate"] != "pending" and row["trainer_version"] < first_step - 1]
            dump_path.write_text("".join(json.dumps(row) + "\n" for row in fates))
    log, dump = MetricsLog(metrics_path), RolloutDump(dump_path if config.run.dump_rollouts else None)
    started = time.perf_counter()
    stream = RolloutStream(router, tokenizer, tasks, config, state, pipeline)
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
                groups, rollout_metrics = await take_batch(stream, version, config, dump)
                generated, stream.generated_tokens = stream.generated_tokens, 0
                t1 = time.perf_counter()
                batch = await build_batch([g.episodes for g in groups], config, tokenizer.pad_token_id, trainer)
                train_metrics = await trainer.train_step.remote(batch)
                for group in groups:
                    dump(group, "trained", version)
                t2 = time.perf_counter()
                paused = await loading if loading else 0.0  # one version in flight at a time
                update = await trainer.publish_weights.remote()
                version = update.version
                loading = asyncio.create_task(load_everywhere(router, stream, update))  # during the next step
                t3 = time.perf_counter()
                seconds = {"wait_for_batch_s": rollout_metrics.pop("timing/wait_for_batch_s"), "train_s": t2 - t1, "sync_s": t3 - t2,
                           "wait_for_weights_s": paused, "step_s": t3 - t0}
                episodes = [e for g in groups for e in g.episodes]
                row = step_metrics(step, episodes, seconds, generated, version) | rollout_metrics | train_metrics
                row |= {"engines/live": router.live_count, "engines/resubmitted": router.resubmitted}
                if train_metrics["train/nonfinite_skipped"]:
                    progress.log(f"step {step:4d}  non-finite loss or gradient: {train_metrics['train/nonfinite_skipped']:.0%} of the optimiser steps skipped")
                for alert in pipeline.watch(step, row) if pipeline else []:  # raises HackingStop if asked to
                    progress.log(f"step {step:4d}  {alert}")
                if step % config.eval.every == 0 or step == config.run.steps:
                    await loading  # evaluate the weights of this step
                    row |= await eval_metrics(router, tokenizer, tasks, config)
                    progress.evaluated(row)
                if step % config.run.checkpoint_every == 0:
                    await save_checkpoint(trainer, run_dir / "checkpoints" / f"step_{step}", step, stream)
                row["time/elapsed_s"] = time.perf_counter() - started
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
