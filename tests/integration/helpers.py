"""Blocking rollout helpers for tests: exact-answer groups generated on a run's first engine."""

import asyncio

from flywheel.rewards.exact import exact_match_reward
from flywheel.types import Episode, Task


def rollout(workers, tokenizer, tasks: list[Task], config, seed: int) -> list[list[Episode]]:
    """group_size completions of each task (raw prompt ids; task i samples with seed + i), each
    rewarded 1 for the exact answer."""
    r = config.rollout
    prompts = [tokenizer.encode(t.prompt) for t in tasks]
    generated = asyncio.run(workers.engines[0].generate(prompts, r.group_size, r.temperature, r.max_new_tokens, seed))
    return [exact_groups(prompt, task, completions) for prompt, task, completions in zip(prompts, tasks, generated)]


def exact_groups(prompt: list[int], task: Task, completions) -> list[Episode]:
    return [Episode(prompt, c, exact_match_reward(c.text, task.answer)) for c in completions]
