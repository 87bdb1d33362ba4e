"""Rollout workers: Ray actors that make whole groups off the driver (``rollout.workers``).

A worker holds what making a group needs: the tokenizer, the tasks and their environment (tools and
sandbox pool included), the reward pipeline (graders, TRL functions, a reward model's actor, an
endpoint judge, guards) and the algorithm's shaping. The driver keeps admission, the staleness gate,
batching, training and checkpoints, and the router: for each group it picks the replica (least
outstanding work first, as for its own groups) and hands the worker that replica's actor, which the
worker calls directly, so tokens travel from the engine to the worker only, and the scored group from
the worker to the driver.

Faults. A replica that dies under a group fails the group in the worker; the driver marks it dead
(the router restarts it) and sends the group again, to another replica, with the same seeds. A
worker that dies (its process or its node) fails its groups on the driver; it is restarted in its
slot (``rollout/worker_restarts``) and they are sent again, same seeds: every admitted prompt still
ends exactly once, and a synchronous run makes the same groups as without workers. A group that
kills its worker ``MAX_DEATHS_PER_GROUP`` times ends the run, as does a worker that cannot start.
A user function with the wrong return type is the same bug as in the driver (``UserFunctionBug``).

A judge on the policy's engines (``reward.judge.engine: policy``) asks the replica making its group:
the driver's router picked it, and a death under the judge's call sends the group again, as above.
A judge on an engine of its own (``reward.judge.engine: own``) is called through its actor, which the driver
sends with a group when it is new to the worker; a death under the judge's call marks the judge's engine
dead on the driver's judge router (which restarts it) and sends the group again, with the new engine.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import ray
from ray.actor import ActorHandle
from ray.exceptions import RayActorError

from flywheel.config import Config
from flywheel.engines.base import EngineDied
from flywheel.engines.remote import BatchedCalls, RemoteEngine, ServesBatches
from flywheel.rewards.faults import UserFunctionBug
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import Group, GroupMaker, Span
from flywheel.types import Completion, RemoteFailure

#: a group whose worker died this many times under it ends the run (it is what kills them)
MAX_DEATHS_PER_GROUP = 3
START_TIMEOUT_S = 600  # a replacement worker not running by then (no node with room) ends the run


#: the replica making the group of the current task (each group runs in a task of its own)
_group_replica: ContextVar[RemoteEngine] = ContextVar("group_replica")


class JudgeDied(RuntimeError):
    """The judge's own engine died under a judge call in a worker (not the replica making the group)."""


class JudgeEngine:
    """What a judge on an engine of its own calls in a worker: that engine, as the driver last sent it."""

    def __init__(self) -> None:
        self.engine: RemoteEngine | None = None

    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
    ) -> list[list[Completion]]:
        try:
            return await self.engine.generate(prompts, n, temperature, max_tokens, seed, stop, schema)
        except EngineDied as died:
            raise JudgeDied(str(died)) from died


class GroupReplica:
    """What a judge on the policy's engines calls in a worker: ``generate`` on the replica making the group it scores."""

    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
    ) -> list[list[Completion]]:
        return await _group_replica.get().generate(prompts, n, temperature, max_tokens, seed, stop, schema)


@dataclass(frozen=True)
class Made:
    """A worker's answer for one group: the group and its spans, or why there is none (the replica died
    under it, the judge's own engine did, or a user function returned the wrong type)."""

    group: Group | None
    spans: list[Span] = field(default_factory=list)
    engine_died: str | None = None
    judge_died: str | None = None
    bug: str | None = None


class RolloutWorker(ServesBatches):
    """The actor: makes the groups the driver sends it (the groups sent in one turn of the driver's loop
    arrive as one Ray call, ``serve_batch``, and stream back as they finish)."""

    def __init__(self, config: Config, reward_model: ActorHandle | None = None) -> None:
        import torch
        from transformers import AutoTokenizer

        from flywheel.algorithms import make_algorithm
        from flywheel.envs.registry import env_factory
        from flywheel.rewards.wiring import reward_pipeline
        from flywheel.rollout.stream import load_tasks

        torch.set_num_threads(1)  # shaping a group's rewards is a few numbers
        for module in config.task.imports:  # environments registered by the user's modules
            importlib.import_module(module)
        tokenizer = AutoTokenizer.from_pretrained(config.model.path)
        guards = getattr(env_factory(config.task.name), "guards", ())
        self.judge = JudgeEngine()
        score_texts = reward_model.score.remote if reward_model is not None else None
        pipeline = reward_pipeline(config, guards, GroupReplica(), self.judge, score_texts)
        algorithm = make_algorithm(config.algorithm)
        self.maker = GroupMaker(tokenizer, load_tasks(config), algorithm, pipeline, config.rollout, config.run.seed)
        self.replicas: dict[int, RemoteEngine] = {}  # router slot -> the replica serving it, as last sent

    async def group(self, position: int, replica: int, engine: ActorHandle | None, judge: ActorHandle | None = None) -> Made:
        """The group of stream position ``position``, generated on the replica in router slot ``replica``;
        ``engine``: that replica's actor, sent when it is new to this worker (the first call, a restart);
        ``judge``: the judge's own engine's actor, likewise."""
        if engine is not None:
            self.replicas[replica] = RemoteEngine(engine)
        if judge is not None:
            self.judge.engine = RemoteEngine(judge)
        _group_replica.set(self.replicas[replica])
        try:
            group, spans = await self.maker.make(position, self.replicas[replica], engine_name=f"engine-{replica}")
        except EngineDied as died:
            return Made(None, engine_died=str(died))
        except JudgeDied as died:
            return Made(None, judge_died=str(died))
        except UserFunctionBug as bug:
            return Made(None, bug=str(bug))
        episodes = [replace(e, failure=RemoteFailure.of(e.failure)) if e.failure is not None else e for e in group.episodes]
        return Made(replace(group, episodes=episodes), spans)


class RolloutWorkers:
    """The driver's side of the workers: each group goes to the worker with the fewest in flight (ties:
    the lowest slot; a slot whose replacement is starting last), on the replica the router picks.
    ``start(slot)``: a new worker actor for ``slot``; ``judge``: the router of the judge's own engine, if any."""

    def __init__(
        self, start: Callable[[int], ActorHandle], count: int, log: Callable[[str], None] = lambda _: None, judge: EngineRouter | None = None
    ) -> None:
        self.start, self.log, self.judge = start, log, judge
        self.actors = [start(slot) for slot in range(count)]
        self.calls = [BatchedCalls(actor, "group") for actor in self.actors]
        self.sent: list[dict[int, object]] = [{} for _ in range(count)]  # per worker: router slot -> the replica it was sent
        self.sent_judge: list[object | None] = [None] * count  # per worker: the judge's engine it was sent
        self.in_flight = [0] * count
        self.restarts = 0
        self.starting: dict[int, asyncio.Task] = {}  # slot -> its replacement, starting
        self.deaths: Counter[int] = Counter()  # position -> deaths of its worker under it

    def ready(self) -> None:
        """Blocks until every worker runs; a worker that cannot start raises its error."""
        ray.get([actor.__ray_ready__.remote() for actor in self.actors])

    async def group(self, position: int, router: EngineRouter) -> tuple[Group, list[Span]]:
        while True:
            index = await router.replica(position)
            engine = router.engines[index]
            judge_index = await self.judge.replica() if self.judge is not None else None
            judge = self.judge.engines[judge_index] if self.judge is not None else None
            slot = min(range(len(self.actors)), key=lambda i: (i in self.starting, self.in_flight[i], i))
            router.begin(index)
            self.in_flight[slot] += 1
            try:
                if slot in self.starting:
                    await asyncio.shield(self.starting[slot])  # raises if no replacement could start
                actor = self.actors[slot]
                new = self.sent[slot].get(index) is not engine  # handles are sent once: pickling one is a Ray call
                new_judge = self.sent_judge[slot] is not judge
                self.sent[slot][index], self.sent_judge[slot] = engine, judge
                made: Made = await self.calls[slot](
                    position, index, actor_of(engine) if new else None, actor_of(judge) if new_judge and judge is not None else None
                )
            except RayActorError as error:
                self._replace(slot, actor, position, error)
                continue
            finally:
                router.end(index)
                self.in_flight[slot] -= 1
            if made.engine_died is not None:
                router.mark_dead(index, engine)
                router.resubmitted += 1
                continue
            if made.judge_died is not None:
                self.judge.mark_dead(judge_index, judge)
                continue
            if made.bug is not None:
                raise UserFunctionBug(made.bug)
            self.deaths.pop(position, None)
            return made.group, made.spans

    def _replace(self, slot: int, dead: ActorHandle, position: int, error: RayActorError) -> None:
        """Starts a new worker in ``slot`` (unless one replaced ``dead`` already)."""
        if error.actor_init_failed:
            raise RuntimeError(f"rollout worker {slot} failed to start: {error}") from error
        self.deaths[position] += 1
        if self.deaths[position] >= MAX_DEATHS_PER_GROUP:
            raise RuntimeError(
                f"the group of stream position {position} killed its rollout worker {MAX_DEATHS_PER_GROUP} times; the last: {error}"
            ) from error
        if self.actors[slot] is not dead or slot in self.starting:
            return
        ray.kill(dead)
        self.restarts += 1
        self.starting[slot] = asyncio.ensure_future(self._restart(slot))

    async def _restart(self, slot: int) -> None:
        """A replacement in ``slot``, once it runs. One whose node died before it ran (Ray may place it on a
        node that just died and is not yet known dead) is placed again; one that cannot start raises."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            actor = self.start(slot)
            try:
                await asyncio.wait_for(asyncio.ensure_future(actor.__ray_ready__.remote()), max(deadline - time.monotonic(), 1))
            except RayActorError as error:
                ray.kill(actor)
                if error.actor_init_failed or time.monotonic() > deadline:
                    raise RuntimeError(f"rollout worker {slot} could not be restarted: {error}") from error
                await asyncio.sleep(1.0)
                continue
            except TimeoutError:
                ray.kill(actor)
                raise RuntimeError(
                    f"no replacement of rollout worker {slot} was running after {START_TIMEOUT_S} s: no live node matching "
                    "cluster.rollout_labels has room for one"
                ) from None
            self.actors[slot], self.calls[slot], self.sent[slot], self.sent_judge[slot] = actor, BatchedCalls(actor, "group"), {}, None
            del self.starting[slot]
            self.log(f"rollout worker {slot} died; restarted it ({self.restarts} restarts), its groups run again")
            return

    def stop(self) -> None:
        for task in self.starting.values():
            task.cancel()
        for actor in self.actors:
            ray.kill(actor)


def actor_of(engine) -> ActorHandle:
    """The Ray actor of a replica behind the router (timed or not)."""
    engine = getattr(engine, "engine", engine)  # a TimedEngine's replica
    if not isinstance(engine, RemoteEngine):
        raise TypeError(f"rollout.workers calls the engines' Ray actors; this run's engine is a {type(engine).__name__}: set rollout.workers=0")
    return engine.actor
