"""``flywheel replay RUN_DIR --step N``: step N's training again, from its rollout dump
(``rollouts/step_N.parquet``) and the trainer as it was before the step (the checkpoint of step N - 1, or
the initial model for step 1): the batch is rebuilt from the dumped episodes, one train_step runs, and its
loss and gradient norm are compared with what metrics.jsonl logged (equal in fp32 on CPU)."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from pathlib import Path

from flywheel.config import Config, ConfigError, load_config
from flywheel.types import Completion, Episode

COMPARED = ("loss/policy", "train/grad_norm")


@dataclass(frozen=True)
class ReplayResult:
    step: int
    logged: dict[str, float]
    replayed: dict[str, float]

    @property
    def exact(self) -> bool:
        return all(self.logged[name] == self.replayed[name] for name in self.logged)

    def report(self) -> str:
        lines = [f"step {self.step}: {'exact' if self.exact else 'DIFFERENT'}"]
        for name, logged in self.logged.items():
            replayed = self.replayed[name]
            lines.append(f"  {name:<16} logged {logged!r:<24} replayed {replayed!r:<24} diff {abs(replayed - logged):.3g}")
        return "\n".join(lines)


def dumped_groups(path: Path) -> list[list[Episode]]:
    """The step's episodes as the trainer got them: groups of consecutive rows of one stream position."""
    import pyarrow.parquet as pq

    groups: list[list[Episode]] = []
    last = None
    for row in pq.read_table(path).to_pylist():
        completion = Completion(
            token_ids=list(row["completion_ids"]),
            logprobs=list(row["engine_logprobs"]),
            text=row["completion"],
            weight_versions=tuple(None if v < 0 else v for v in row["weight_versions"]),
            truncated=row["truncated"],
            loss_mask=tuple(row["loss_mask"]),
        )
        episode = Episode(list(row["prompt_ids"]), completion, row["reward"], row["error"])
        if row["position"] != last:
            groups.append([])
            last = row["position"]
        groups[-1].append(episode)
    return groups


def replay_inputs(run_dir: Path, step: int) -> tuple[Config, Path, Path | None, dict]:
    """(config, dump, checkpoint or None for the initial model, logged row); ConfigError names what is missing."""
    config = load_config(run_dir / "config.yaml")
    dump = run_dir / "rollouts" / f"step_{step:06d}.parquet"
    if not dump.is_file():
        raise ConfigError(f"step {step} of {run_dir} has no rollout dump ({dump}); dumped steps are multiples of monitor.dump_every")
    checkpoint = None
    if step > 1:
        checkpoint = run_dir / "checkpoints" / f"step_{step - 1}"
        if not (checkpoint / "trainer_state.pt").is_file():
            raise ConfigError(
                f"replaying step {step} needs the checkpoint of step {step - 1} ({checkpoint}); run with run.checkpoint_every dividing {step - 1}"
            )
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    logged = next((r for r in rows if r["step"] == step and "loss/policy" in r), None)
    if logged is None:
        raise ConfigError(f"metrics.jsonl of {run_dir} logged no training at step {step}")
    return config, dump, checkpoint, logged


def replay(run_dir: Path, step: int) -> ReplayResult:
    """Runs step ``step`` again on a trainer of its own (Ray started if needed, and stopped)."""
    import ray

    from flywheel.cluster.workers import start_trainer
    from flywheel.weights import open_transport

    config, dump, checkpoint, logged = replay_inputs(run_dir, step)
    own_ray = not ray.is_initialized()
    trainer = start_trainer(config, open_transport(config.weights, config.rollout.engines))
    try:
        replayed = asyncio.run(_train_again(config, trainer, dump, checkpoint))
    finally:
        trainer.shutdown()
        if own_ray:
            ray.shutdown()
    return ReplayResult(step, {name: float(logged[name]) for name in COMPARED}, {name: float(replayed[name]) for name in COMPARED})


async def _train_again(config: Config, trainer, dump: Path, checkpoint: Path | None) -> dict[str, float]:
    from transformers import AutoTokenizer

    from flywheel.algorithms import make_algorithm
    from flywheel.algorithms.batch import build_batch

    if checkpoint is not None:
        await trainer.restore(str(checkpoint))
    pad_id = AutoTokenizer.from_pretrained(config.model.path).pad_token_id
    batch = await build_batch(dumped_groups(dump), make_algorithm(config.algorithm), pad_id, trainer)
    metrics = await trainer.train_step(batch)
    return {name: value if math.isfinite(value) else float("nan") for name, value in metrics.items()}
