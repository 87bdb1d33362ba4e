"""``flywheel replay RUN_DIR --step N``: step N's training again, from its rollout dump
(``rollouts/step_NNNNNN.parquet``) and the trainer as it was before the step (the checkpoint of step N - 1,
or the initial model for step 1): the batch is rebuilt from the dump (tokens, engine logprobs, the loss
mask and advantages it trained with), one train_step runs, and its loss and gradient norm are compared
with what metrics.jsonl logged (equal in fp32 on CPU). For critic algorithms (PPO) the dump's value
targets and rollout-time values are restored too."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from flywheel.config import Config, ConfigError, load_config
from flywheel.monitor.metrics import read_metrics
from flywheel.types import Completion, Episode, TrainBatch, collate

COMPARED = ("loss/policy", "train/grad_norm", "loss/critic", "train/critic_grad_norm")  # those the step logged


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


def dumped_batch(path: Path, pad_id: int) -> TrainBatch:
    """The step's TrainBatch from its dump: the episodes' tokens and engine logprobs, collated in the
    trained order, with the loss mask and advantages (and, for a critic, the returns and rollout-time
    values) the step trained with (float64 in the file, float32 when trained: the round trip is exact)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    episodes = [
        Episode(
            list(r["prompt_ids"]),
            Completion(
                list(r["completion_ids"]),
                list(r["engine_logprobs"]),
                r["completion"],
                tuple(None if v < 0 else v for v in r["weight_versions"]),
                r["truncated"],
            ),
            r["reward"],
            r["error"],
        )
        for r in rows
    ]
    batch = collate(episodes, pad_id)
    critic = bool(rows[0]["returns"])
    columns = ("loss_mask", "advantages", "returns", "old_values") if critic else ("loss_mask", "advantages")
    fields = {name: torch.zeros_like(batch.loss_mask) for name in columns}
    for i, r in enumerate(rows):
        span = slice(len(r["prompt_ids"]), len(r["prompt_ids"]) + len(r["completion_ids"]))
        for name, tensor in fields.items():
            tensor[i, span] = torch.tensor(r[name], dtype=tensor.dtype)
    return replace(batch, **fields)


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
    rows = read_metrics(run_dir / "metrics.jsonl")
    logged = next((r for r in rows if r["step"] == step and "loss/policy" in r), None)
    if logged is None:
        raise ConfigError(f"metrics.jsonl of {run_dir} logged no training at step {step}")
    return config, dump, checkpoint, logged


def replay(run_dir: Path, step: int) -> ReplayResult:
    """Runs step ``step`` again on a trainer of its own (Ray started if needed, and stopped)."""
    import ray

    from flywheel.cluster.workers import start_trainer, trainer_spec
    from flywheel.weights import open_transport

    config, dump, checkpoint, logged = replay_inputs(run_dir, step)
    own_ray = not ray.is_initialized()
    trainer = start_trainer(trainer_spec(config), open_transport(config.weights, config.rollout.engines))
    try:
        replayed = asyncio.run(_train_again(config, trainer, dump, checkpoint))
    finally:
        trainer.shutdown()
        if own_ray:
            ray.shutdown()
    names = [name for name in COMPARED if name in logged]
    return ReplayResult(step, {name: float(logged[name]) for name in names}, {name: float(replayed[name]) for name in names})


async def _train_again(config: Config, trainer, dump: Path, checkpoint: Path | None) -> dict[str, float]:
    from transformers import AutoTokenizer

    if checkpoint is not None:
        await trainer.restore(str(checkpoint))
    batch = dumped_batch(dump, AutoTokenizer.from_pretrained(config.model.path).pad_token_id)
    trained = await trainer.train_step(batch)
    return {name: float(value) for name, value in trained.metrics.items() if name in COMPARED}
