"""Any reasoning-gym procedural dataset as an environment, graded by the dataset's own ``score_answer``.

    make_env("reasoning_gym", dataset="basic_arithmetic", min_terms=2, max_terms=3)

Extra keyword arguments are the dataset's config. Items are generated locally from the seed (no
download). The model answers inside ``<answer>...</answer>``; without the tags its whole text is
scored.
"""

from __future__ import annotations

from typing import Any

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.registry import register_env

INSTRUCTION = "\nGive your final answer inside <answer></answer>."


@register_env("reasoning_gym")
class ReasoningGymEnv:
    max_turns, tools, stop = 1, (), ()

    def __init__(self, dataset: str, time_limit_s: float = 60.0, system_prompt: str | None = None, **config: Any) -> None:
        import reasoning_gym

        if dataset not in reasoning_gym.factory.DATASETS:
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r} (known: {', '.join(sorted(reasoning_gym.factory.DATASETS))})")
        self.dataset, self.config = dataset, config
        self.time_limit_s, self.system_prompt = time_limit_s, system_prompt
        self.scorer = self._create(size=1, seed=0)

    def _create(self, size: int, seed: int) -> Any:
        import reasoning_gym

        return reasoning_gym.create_dataset(self.dataset, size=size, seed=seed, **self.config)

    def tasks(self, size: int, seed: int) -> list[Task]:
        return [Task(item["question"] + INSTRUCTION, str(item["answer"]), {"entry": item}) for item in self._create(size, seed)]

    def reset(self, task: Task) -> str:
        self.entry = task.metadata["entry"]
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        from reasoning_gym.utils import extract_answer

        answer = extract_answer(model_text)
        return final(float(self.scorer.score_answer(model_text if answer is None else answer, self.entry)))
