"""``flywheel eval``: n samples of every held-out task of the configured environment on a checkpoint (or the
initial model), on one engine replica or several: pass@k, maj@k and mean@k with bootstrap intervals, a JSON
report and one line per task."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import ray
from transformers import AutoTokenizer

from flywheel.cluster.workers import engine_group, start_engines
from flywheel.config import Config, ConfigError, model_problem
from flywheel.eval.estimators import summarise, task_scores
from flywheel.rewards.answer_form import final_answer
from flywheel.rollout.group import run_group
from flywheel.rollout.router import EngineRouter
from flywheel.rollout.stream import load_tasks


@dataclass(frozen=True)
class EvalRequest:
    k: int = 1  # the k of pass@k, maj@k, mean@k
    n: int | None = None  # samples per task (n >= k; None: k); pass@k uses all n
    engines: int | None = None  # engine replicas (None: rollout.engines)
    correct_at: float = 1.0  # a sample is correct when its reward is at least this
    resamples: int = 1000  # bootstrap resamples over tasks
    output: str | None = None  # report path (None: eval_k<K>.json beside the checkpoint, or under run.output_dir)


def resolve_checkpoint(path: str) -> Path:
    """A model directory as given, or a run directory's final model (else its newest checkpoint)."""
    root = Path(path)
    if (root / "config.json").is_file():
        return root
    steps = sorted(root.glob("checkpoints/step_*/config.json"), key=lambda p: int(p.parent.name.removeprefix("step_")))
    for candidate in [root / "final" / "config.json", *reversed(steps)]:
        if candidate.is_file():
            return candidate.parent
    raise ConfigError(f"--checkpoint '{path}' is neither a model directory (config.json) nor a run directory with final/ or checkpoints/step_N/")


def eval_config(config: Config, checkpoint: str | None, request: EvalRequest) -> Config:
    """The run's config pointed at the checkpoint; raises ConfigError."""
    if request.k < 1 or (request.n is not None and request.n < request.k):
        raise ConfigError(f"--k must be at least 1 and --n at least k (got k={request.k}, n={request.n})")
    if checkpoint is None:
        return config
    path = str(resolve_checkpoint(checkpoint))
    if problem := model_problem(path):
        raise ConfigError(problem)
    return config.model_copy(update={"model": config.model.model_copy(update={"path": path})})


def evaluate_checkpoint(config: Config, checkpoint: str | None, request: EvalRequest) -> dict:
    """Starts ``request.engines`` replicas (None: ``rollout.engines``) placed as a run's, runs the eval, stops
    them; writes the report (``report["path"]``) and ``<report>.tasks.jsonl`` and returns the report."""
    config = eval_config(config, checkpoint, request)
    out = Path(request.output) if request.output else _default_output(config, checkpoint, request.k)
    own_ray = not ray.is_initialized()
    engines = start_engines(engine_group(config, replicas=request.engines))
    try:
        return evaluate_on(config, engines, request, out)
    finally:
        for engine in engines:
            engine.shutdown()
        if own_ray:
            ray.shutdown()


def evaluate_on(config: Config, engines: list, request: EvalRequest, out: Path) -> dict:
    """The eval on engines already serving the model; writes ``out`` and ``<out>.tasks.jsonl``."""
    report, per_task = asyncio.run(_evaluate(config, engines, request))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in per_task))
    return report | {"path": str(out)}


def _default_output(config: Config, checkpoint: str | None, k: int) -> Path:
    where = Path(config.model.path) if checkpoint is not None else Path(config.run.output_dir) / "eval" / config.run.name
    return where / f"eval_k{k}.json"


async def _evaluate(config: Config, engines: list, request: EvalRequest) -> tuple[dict, list[dict]]:
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    tasks = load_tasks(config)
    router = EngineRouter(engines)
    k, n, seed = request.k, request.n or request.k, config.run.seed
    temperature, max_tokens = config.eval.temperature, config.rollout.max_new_tokens
    groups = await asyncio.gather(
        *(
            run_group(router.pinned(i), tokenizer, tasks.env_factory, task, n, temperature, max_tokens, seed + i * n)
            for i, task in enumerate(tasks.eval)
        )
    )
    await router.close()
    per_task = []
    for i, (task, episodes) in enumerate(zip(tasks.eval, groups, strict=True)):
        rewards = [e.reward if e.valid else 0.0 for e in episodes]  # an episode that failed scores 0 here
        answers = [final_answer(e.completion.text) for e in episodes]
        scores = task_scores(rewards, answers, k, lambda r: r >= request.correct_at)
        per_task.append({"task": i, "prompt": task.prompt, "answer": task.answer, "rewards": rewards, "answers": answers, **scores})
    metrics = {name: summarise([row[name] for row in per_task], request.resamples, seed=seed) for name in (f"pass@{k}", f"maj@{k}", f"mean@{k}")}
    invalid = sum(not e.valid for group in groups for e in group)
    report = {
        "model": config.model.path,
        "environment": config.task.name,
        "tasks": len(per_task),
        "k": k,
        "n": n,
        "temperature": temperature,
        "engines": len(engines),
        "correct_at": request.correct_at,
        "invalid_episodes": invalid,
        "metrics": metrics,
    }
    return report, per_task
