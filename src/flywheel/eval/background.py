"""Periodic eval on engine replicas of its own (``eval.engines > 0``), so that evaluating never pauses an
async run's rollouts: at an eval step the replicas load that step's weights (the run's engines keep
generating), then evaluate in the background while training goes on. Each result is its own row of
metrics.jsonl with the step whose weights it measured (``step``, ``eval/...``, ``weights/version``),
written when it is ready; the run waits for the last ones before it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from flywheel.cluster.workers import EngineGroup, start_engines
from flywheel.config import Config
from flywheel.engines.base import Engine
from flywheel.eval.heldout import eval_metrics
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import TaskSet, load_within_stall_limit
from flywheel.weights.base import WeightUpdate


class BackgroundEval:
    def __init__(
        self, engines: list[Engine], tokenizer, tasks: TaskSet, more: dict[str, TaskSet], config: Config, report: Callable[[dict], None]
    ) -> None:
        self.router = EngineRouter(engines)
        self.tokenizer, self.tasks, self.more, self.config, self.report = tokenizer, tasks, more, config, report
        self.running: list[asyncio.Task] = []
        self._one_at_a_time = asyncio.Lock()  # replicas serve one version at a time

    async def start(self, step: int, update: WeightUpdate) -> None:
        """Loads ``update`` on the eval replicas (waiting for the eval before, if still running, and raising
        its failure), then evaluates in the background; returns once the weights are loaded."""
        await self._one_at_a_time.acquire()
        try:
            for task in [task for task in self.running if task.done()]:  # a failed eval ends the run now, not at its end
                self.running.remove(task)
                task.result()
            await load_within_stall_limit(self.router, update, self.config.rollout.stall_timeout_s)
        except BaseException:
            self._one_at_a_time.release()
            raise
        self.running.append(asyncio.create_task(self._evaluate(step, update.version), name=f"eval-step-{step}"))

    async def _evaluate(self, step: int, version: int) -> None:
        try:
            metrics = await eval_metrics(self.router, self.tokenizer, self.tasks, self.config, self.more)
        finally:
            self._one_at_a_time.release()
        self.report({"step": step, "weights/version": version, **metrics})

    async def finish(self) -> None:
        """Waits for the evals under way (their rows are written); raises the first failure."""
        running, self.running = self.running, []
        await asyncio.gather(*running)

    async def close(self) -> None:
        """Cancels evals under way and stops the replicas."""
        for task in self.running:
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        await self.router.close()
        for engine in self.router.engines:
            await asyncio.to_thread(engine.shutdown)


def start_background_eval(group: EngineGroup, tokenizer, tasks: TaskSet, more: dict[str, TaskSet], config: Config) -> BackgroundEval:
    """The evaluation replicas of ``group`` (the run spec's ``eval_engines``), started."""
    return BackgroundEval(start_engines(group), tokenizer, tasks, more, config, report=lambda row: None)
