"""A programmable session: a run's engines, trainer ranks and weight transport, driven call by call from a
script or a notebook, for loops that are not the built-in one (best-of-n then SFT, distillation, games).

    from flywheel import Session
    with Session("configs/quickstart.yaml") as s:
        groups = s.sample(s.tasks.train[:8], n=8)           # episodes scored by the task's environment
        batch = s.batch(groups)                             # the algorithm's advantages
        s.forward_backward(batch, my_loss)                  # any loss on the trainer's micro-batches
        s.optim_step()
        s.publish()                                         # the engines serve the new weights

The built-in step is ``s.train_step(s.batch(groups))`` then ``s.publish()``. A session builds the same parts
as ``flywheel train`` (``controller.setup``: run directory, router, reward pipeline, tasks, algorithm) and
closes them in the same order; ``log`` writes a row to the run's metrics and trackers. Every call blocks
until done; the session's own event loop runs on a thread, so a notebook's running loop is not in the way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import ray
import torch

from flywheel.algorithms.batch import build_batch
from flywheel.algorithms.distill import prefill_logprobs
from flywheel.api import ConfigLike, Overrides, as_config
from flywheel.cluster.workers import Workers, local_run_spec, start_workers
from flywheel.config import Config
from flywheel.controller import Run, close, publish_and_load, setup
from flywheel.preemption import StopSignals
from flywheel.rollout.group import EnvEpisode, run_group
from flywheel.rollout.stream import group_seed, score_group
from flywheel.trainer.trainer import LossFn
from flywheel.types import StepResult, Task, TrainBatch, collate
from flywheel.weights import open_transport

T = TypeVar("T")


class Session:
    """``Session(config, overrides)``: starts the config's workers (or uses ``workers``, which stay the caller's)
    and publishes the initial weights. Close it (or use ``with``) to stop what it started."""

    def __init__(self, config: ConfigLike = None, overrides: Overrides = (), workers: Workers | None = None) -> None:
        resolved = as_config(config, overrides)
        self._own_ray, self._own_workers, self.samples = not ray.is_initialized(), workers is None, 0  # samples: groups so far
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="flywheel-session", daemon=True)
        self._thread.start()
        try:
            if workers is None:
                spec = local_run_spec(resolved)
                resolved, workers = spec.config, start_workers(spec, open_transport(resolved.weights, resolved.rollout.engines))
            self.run: Run = self._call(_on_loop(setup, resolved, workers, StopSignals()))
        except BaseException:
            self._stop_workers(workers)
            raise
        try:
            if self.run.checkpoint is not None:  # run.resume: that run's latest checkpoint
                self._call(self.run.trainer.restore(str(self.run.checkpoint)))
            self.publish()
        except BaseException:
            self.close()
            raise

    # --- what the run holds ------------------------------------------------------------------------
    @property
    def config(self) -> Config:
        return self.run.config

    @property
    def tasks(self):
        """The task set (``.train``, ``.eval``, ``.env_factory``) of the config."""
        return self.run.tasks

    @property
    def tokenizer(self):
        return self.run.tokenizer

    @property
    def run_dir(self) -> Path:
        return self.run.run_dir

    @property
    def version(self) -> int:
        """The weight version the engines serve."""
        return self.run.version

    # --- the calls ---------------------------------------------------------------------------------
    def sample(
        self, tasks: Sequence[Task | str], n: int | None = None, temperature: float | None = None, max_tokens: int | None = None
    ) -> list[list[EnvEpisode]]:
        """A group of ``n`` episodes (default ``rollout.group_size``) per task, run by the task's environment
        on the engines (a group's turns on one replica) and scored as a run scores them (environment grade or
        reward pipeline, then the algorithm's shaping). A task is a ``Task`` (``tasks.train``, ``tasks.eval``: a
        dataset's rows as its environment reads them) or a prompt alone."""
        r = self.config.rollout
        n, temperature, max_tokens = n or r.group_size, r.temperature if temperature is None else temperature, max_tokens or r.max_new_tokens
        first, self.samples = self.samples, self.samples + len(tasks)
        seeds = [group_seed(self.config.run.seed, first + i) for i in range(len(tasks))]

        async def groups() -> list[list[EnvEpisode]]:
            return await asyncio.gather(
                *(self._group(Task(t) if isinstance(t, str) else t, n, temperature, max_tokens, s) for t, s in zip(tasks, seeds))
            )

        return self._call(groups())

    async def _group(self, task: Task, n: int, temperature: float, max_tokens: int, seed: int) -> list[EnvEpisode]:
        run, key = self.run, object()
        try:
            episodes = await run_group(run.router.pinned(key), run.tokenizer, run.tasks.env_factory, task, n, temperature, max_tokens, seed)
        finally:
            run.router.release(key)
        scored, _, _ = await score_group(episodes, task, run.algorithm, run.pipeline, max_tokens)
        return scored

    def batch(self, groups: Sequence[Sequence[EnvEpisode]]) -> TrainBatch:
        """The groups (of equal size) collated with the algorithm's advantages, as a step's batch."""
        run = self.run
        return self._call(build_batch([list(g) for g in groups], run.algorithm, self.tokenizer.pad_token_id, run.trainer, run.teacher_score))

    def collate(self, episodes: Sequence[EnvEpisode]) -> TrainBatch:
        """The episodes as a batch without advantages (zero): for a loss that does not use them (SFT). An invalid
        episode's tokens are not trained on (loss mask 0)."""
        batch = collate(list(episodes), self.tokenizer.pad_token_id)
        valid = torch.tensor([e.valid for e in episodes], dtype=batch.loss_mask.dtype)
        return replace(batch, loss_mask=batch.loss_mask * valid[:, None])

    def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """The trainer's current logprobs of ``batch.tokens`` [B, T] (0 where the batch has no token)."""
        return self._call(self.run.trainer.logprobs(batch)) * batch.attention_mask

    def engine_logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """A policy engine replica's logprobs of ``batch.tokens`` [B, T], aligned as ``logprobs``, from a prefill."""

        async def score() -> torch.Tensor:
            return await prefill_logprobs(self.run.router.engines[await self.run.router.replica()].score, batch)

        return self._call(score())

    def teacher_logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """The distillation teacher's logprobs of ``batch.tokens`` [B, T], aligned as ``logprobs`` (``algorithm.teacher``)."""
        if self.run.teacher_score is None:
            raise ValueError("this session has no teacher: choose algorithm.name=distill and set algorithm.teacher to the teacher model's directory")
        return self._call(prefill_logprobs(self.run.teacher_score, batch))

    def forward_backward(self, batch: TrainBatch, loss_fn: LossFn) -> dict[str, float]:
        """Accumulates the gradients of ``loss_fn(micro, logprobs, totals)`` over ``batch``, cut into micro-batches
        on the trainer ranks (``trainer.max_tokens_per_microbatch``); gradients add up until ``optim_step``.
        ``loss_fn`` returns the micro-batch's share of the loss (divide by ``totals.tokens`` or
        ``totals.sequences``, the counts of the whole batch) alone or with a dict of metrics; it runs on the
        trainer's processes, so it must be importable or picklable (a function of a script is)."""
        return self._call(self.run.trainer.forward_backward(batch, loss_fn))

    def optim_step(self) -> dict[str, float]:
        """Clips and applies the accumulated gradients (a non-finite loss or gradient is skipped, and said so in
        ``train/nonfinite_skipped``); the trainer's weights become the next version."""
        return self._call(self.run.trainer.apply_gradients())

    def train_step(self, batch: TrainBatch) -> StepResult:
        """The built-in loop's training call: ``trainer.minibatches`` optimiser steps of the algorithm's loss."""
        return self._call(self.run.trainer.train_step(batch))

    def publish(self) -> int:
        """The trainer's weights to every engine replica, proven there (``weights.probe``); returns the version
        the engines now serve."""
        self._call(publish_and_load(self.run))
        return self.run.version

    def save(self, path: str | Path) -> Path:
        """A resumable checkpoint at ``path``: the model (HF format, loadable by ``evaluate``) and the sharded
        trainer state (optimiser included)."""
        self._call(self.run.trainer.save_checkpoint(str(path)))
        return Path(path)

    def load(self, path: str | Path) -> int:
        """Restores a checkpoint ``save`` wrote and publishes it; returns the version the engines serve."""
        self._call(self.run.trainer.restore(str(path)))
        return self.publish()

    def log(self, row: dict[str, float], step: int) -> None:
        """A row of metrics at ``step``, to the run directory's metrics.jsonl and the config's trackers."""
        self.run.writers.trackers.log({"step": step, **row}, step)

    def close(self) -> None:
        """Closes the run's parts (``controller.close``), then stops the workers and Ray this session started."""
        if self._loop.is_closed():
            return
        try:
            self._call(close(self.run))
        finally:
            self._stop_workers(self.run.workers)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- glue --------------------------------------------------------------------------------------
    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _stop_workers(self, workers: Workers | None) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        if self._own_workers and workers is not None:
            workers.shutdown()
        if self._own_ray and ray.is_initialized():
            ray.shutdown()


async def _on_loop(build, *args):
    """``build(*args)`` on the session's event loop (what it creates binds to that loop)."""
    return build(*args)
