"""Blocking rollout helpers for tests: exact-answer groups generated on a run's first engine."""

import asyncio
import contextlib
import json
import math
import os
import time
from pathlib import Path

import psutil
import ray
from ray.exceptions import GetTimeoutError, RayActorError

from flywheel.engines.vllm import VLLMEngine
from flywheel.metrics import unregistered
from flywheel.rewards.exact import exact_match_reward
from flywheel.types import Episode, Task

#: The quickstart made synchronous and uncorrected, as before async became its default: reproducible step for step.
SYNC = ("rollout.max_staleness=0", "algorithm.off_policy=none")


def rollout(workers, tokenizer, tasks: list[Task], config, seed: int) -> list[list[Episode]]:
    """group_size completions of each task (raw prompt ids; task i samples with seed + i), each
    rewarded 1 for the exact answer."""
    r = config.rollout
    prompts = [tokenizer.encode(t.prompt) for t in tasks]
    generated = asyncio.run(workers.engines[0].generate(prompts, r.group_size, r.temperature, r.max_new_tokens, seed))
    return [exact_groups(prompt, task, completions) for prompt, task, completions in zip(prompts, tasks, generated)]


def exact_groups(prompt: list[int], task: Task, completions) -> list[Episode]:
    return [Episode(prompt, c, exact_match_reward(c.text, task.answer)) for c in completions]


def undocumented_metrics(rows: list[dict]) -> set[str]:
    """Metric names in ``rows`` (``step`` aside) that the registry, flywheel.metrics, does not hold."""
    return unregistered({key for row in rows for key in row} - {"step"})


def crashing_engine() -> type[VLLMEngine]:
    """An engine whose process dies in its first request once it serves weights version 2 (step 3's
    rollouts). Defined in a function so that Ray ships it by value."""

    class CrashingEngine(VLLMEngine):
        async def generate(self, *args, **kwargs):
            if self.weight_version >= 2:
                await asyncio.sleep(0.5)  # the request is in flight
                os._exit(1)
            return await super().generate(*args, **kwargs)

    return CrashingEngine


GOLDEN = Path(__file__).resolve().parents[2] / "tests/golden/quickstart_20_steps.jsonl"
#: golden name -> metric name in metrics.jsonl
GOLDEN_KEYS = {"loss": "loss/policy", "reward": "reward/mean", "grad_norm": "train/grad_norm", "entropy": "train/entropy"}


def golden_view(rows: list[dict]) -> list[dict]:
    """metrics.jsonl rows (steps 1..) as the golden file keeps them."""
    return [{"step": r["step"]} | {name: r[key] for name, key in GOLDEN_KEYS.items()} for r in rows]


def assert_matches_golden(rows: list[dict]) -> None:
    """``rows`` (steps 1..n of a quickstart run in test_golden.py's config) reproduce the first n golden
    steps: the mean reward exactly (the same tokens were sampled), the loss, gradient norm and entropy to
    rel 1e-4 / abs 1e-6. Bitwise on the kind of CPU that wrote the file; another instruction set takes
    other kernels (written with AVX-512; on an AVX2-only CPU the same code gave the same rewards and
    floats up to 1.3e-5 apart, rel 1.1e-5)."""
    got = golden_view(rows)
    want = [json.loads(line) for line in GOLDEN.read_text().splitlines()][: len(got)]
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert (g["step"], g["reward"]) == (w["step"], w["reward"]), (w, g)
        for name in ("loss", "grad_norm", "entropy"):
            assert math.isclose(g[name], w[name], rel_tol=1e-4, abs_tol=1e-6), (w["step"], name, w[name], g[name])


def actor_processes(pid: int, title: str) -> list[psutil.Process]:
    """The Ray actor processes titled ``title`` (``ray::Trainer``, ``ray::VLLMEngine``: not their vLLM
    engine cores) among the descendants of process ``pid``."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a short-lived child may be gone already
            if process.cmdline()[:1] and process.cmdline()[0].startswith(title):
                found.append(process)
    return found


def dies_within(actor, seconds: float) -> bool:
    """Whether ``actor`` stops answering within ``seconds``. ``ray.kill`` only sends the kill: a call made
    right after it can still be served by the process on its way out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=max(0.1, deadline - time.monotonic()))
        except RayActorError:
            return True
        except GetTimeoutError:
            return False
        time.sleep(0.2)
    return False
