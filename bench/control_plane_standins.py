"""The stand-ins of bench/control_plane.py (engine replicas and a trainer), in a module of their own so that Ray
ships them by reference to its workers, as a real engine's and transport's classes are (classes of a script's
__main__ would be pickled by value with every call). They exist only in this bench."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path

import ray

from flywheel.engines.base import Loaded
from flywheel.engines.remote import ServesBatches
from flywheel.types import Completion, StepResult
from flywheel.weights.base import WeightUpdate


@dataclass(frozen=True)
class Version(WeightUpdate):
    """A published version, nothing to load."""

    version: int

    def receive(self, link=None):
        return iter(())


class StandInEngines(ServesBatches):
    """Serves every stand-in replica's requests: completions of ``max_tokens`` tokens after ``latency_s``."""

    def __init__(self, vocab: int, latency_s: float, seed: int) -> None:
        rng = random.Random(seed)
        self.pool = [rng.randrange(3, vocab) for _ in range(1 << 16)]
        self.latency_s, self.version, self.rng = latency_s, 0, rng

    async def generate(self, prompts, n, temperature, max_tokens, seed, stop=None, schema=None) -> list[list[Completion]]:
        await asyncio.sleep(self.latency_s * self.rng.lognormvariate(0.0, 0.25))
        logprobs, versions = [-1.0] * max_tokens, (self.version,) * max_tokens
        out = []
        for i in range(len(prompts)):
            completions = []
            for j in range(n):
                start = ((seed + i * n + j) * 7919) % (len(self.pool) - max_tokens)
                completions.append(Completion(self.pool[start : start + max_tokens], logprobs, str((seed + j) % 1000), versions))
            out.append(completions)
        return out

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        self.version = max(self.version, update.version)
        return Loaded(0.0)

    def shutdown(self) -> None:
        pass


class StandInTrainerActor:
    def __init__(self, train_s: float) -> None:
        self.train_s = train_s

    async def step(self, batch) -> StepResult:
        await asyncio.sleep(self.train_s)
        rows = int(batch.tokens.shape[0])
        return StepResult({"loss/policy": 0.0, "train/grad_norm": 0.0, "train/entropy": 1.0, "train/rows": float(rows)})


class StandInTrainer:
    """The trainer group's surface the controller calls: each step's batch goes to a Ray actor that takes a fixed time."""

    def __init__(self, train_s: float) -> None:
        self.actor = ray.remote(StandInTrainerActor).options(num_cpus=0).remote(train_s)
        self.version = 0

    async def train_step(self, batch, keep_logprobs: bool = False) -> StepResult:
        self.version += 1
        return await self.actor.step.remote(batch)

    async def publish_weights(self) -> Version:
        return Version(self.version)

    async def save_checkpoint(self, directory: str, resumable: bool = True) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)

    async def restore(self, directory: str) -> None:
        raise NotImplementedError("the stand-in trainer holds no state")

    def shutdown(self) -> None:
        ray.kill(self.actor)
