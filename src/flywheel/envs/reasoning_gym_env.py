"""Any reasoning-gym procedural dataset as an environment, scored strictly by default.

    make_env("reasoning_gym", dataset="basic_arithmetic", min_terms=2, max_terms=3)
    make_env("reasoning_gym", dataset="basic_arithmetic", scoring="lenient")

Extra keyword arguments are the dataset's config. Items are generated locally from the seed (no
download). The model answers inside ``<answer>...</answer>`` (the last one counts); without the tags
its whole text is the answer.

``scoring="strict"`` (default): full credit or none, as ``reasoning_gym_scoring`` documents: the answer
must equal the reference after normalisation, or, for datasets with many valid answers, pass the
dataset's own verifier in full without listing the reference among other candidates.
``scoring="lenient"``: the dataset's ``score_answer`` as it is, partial credit included (it pays an
answer that merely contains the reference: ``-75 or -76`` earns 0.3 for -75).

Either way, an answer that a dataset's verifier would run as Python and that is more than a plain
expression scores 0 without reaching it (``reasoning_gym_eval_guard``).
"""

from __future__ import annotations

from typing import Any, Literal

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.reasoning_gym_eval_guard import may_evaluate
from flywheel.envs.reasoning_gym_scoring import (
    SOLUTION_CHECKED,
    holds_reference_and_more,
    strict_score,
)
from flywheel.envs.registry import register_env

INSTRUCTION = "\nGive your final answer inside <answer></answer>."


@register_env("reasoning_gym")
class ReasoningGymEnv:
    max_turns, tools, stop = 1, (), ()

    def __init__(
        self,
        dataset: str,
        time_limit_s: float = 60.0,
        system_prompt: str | None = None,
        scoring: Literal["strict", "lenient"] = "strict",
        **config: Any,
    ) -> None:
        import reasoning_gym

        if dataset not in reasoning_gym.factory.DATASETS:
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r} (known: {', '.join(sorted(reasoning_gym.factory.DATASETS))})")
        if scoring not in ("strict", "lenient"):
            raise ValueError(f"reasoning_gym scoring must be 'strict' or 'lenient', not {scoring!r}")
        self.dataset, self.config, self.scoring = dataset, config, scoring
        self.time_limit_s, self.system_prompt = time_limit_s, system_prompt
        self.scorer = self._create(size=1, seed=0)

    def _create(self, size: int, seed: int) -> Any:
        import reasoning_gym

        return reasoning_gym.create_dataset(self.dataset, size=size, seed=seed, **self.config)

    def tasks(self, size: int, seed: int) -> list[Task]:
        return [Task(item["question"] + INSTRUCTION, str(item["answer"]), {"entry": item}) for item in self._create(size, seed)]

    def reset(self, task: Task) -> str:
        self.entry = task.metadata["entry"]
        self.source = self.entry.get("metadata", {}).get("source_dataset", self.dataset)  # composite: the item's own
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        from reasoning_gym.utils import extract_answer

        tagged = extract_answer(model_text)
        answer = model_text if tagged is None else tagged
        return final(self.score(answer))

    def score(self, answer: str) -> float:
        """The reward of one extracted answer under this environment's ``scoring``."""
        if not may_evaluate(self.source, answer):  # the dataset's verifier would run it as Python here
            return 0.0
        if self.scoring == "lenient":
            return float(self.scorer.score_answer(answer, self.entry))
        reference = self.entry["answer"]
        if reference is None:
            return float(self.scorer.score_answer(answer, self.entry) == 1.0)
        if self.source in SOLUTION_CHECKED:
            full = self.scorer.score_answer(answer, self.entry) == 1.0
            return float(full and not holds_reference_and_more(answer, str(reference)))
        return strict_score(answer, str(reference))
