"""rollouts/step_NNNNNN.parquet: every episode trained at a step, one row each, in the order of the
trained batch (groups by stream position, episodes in their group's order).

The columns are a contract (dashboards and notebooks read them by name). Per-token lists all have
one entry per completion token (model and environment tokens alike):

    step, position, index           int: the step, the group's stream position, the episode's index in it
    env                             str: task.name
    prompt, prompt_ids              the prompt as the model read it (decoded with special tokens), its ids
    completion, completion_ids      everything after the prompt (environment turns included), its ids
    completion_tokens               list<str>: each id decoded on its own, for display
    engine_logprobs                 list<float>: the engine's logprob of each token (0.0 on environment tokens)
    trainer_logprobs                list<float>: the trainer's, at that step before its update
    advantages                      list<float>: the algorithm's advantage of each token
    returns, old_values             list<float>: critic algorithms (PPO): the value targets and the
                                    critic's rollout-time values of each token; empty lists otherwise
    reward                          float: the final reward (after the reward pipeline and shaping)
    sub_rewards                     str: JSON object, name -> value (env: the environment's grade;
                                    pipeline: the reward pipeline's total, when one scores)
    guard_flags                     list<str>: the hacking guards that flagged the episode
    weight_versions                 list<int>: the weight version that sampled each token, -1 on environment tokens
    loss_mask                       list<int>: 1 where the token was trained on (0 on environment tokens,
                                    on every token of an invalid episode, and where the algorithm filters)
    turns, tool_calls               int: model turns, tool calls
    valid, error, truncated         bool, str or null, bool
    weight_version                  int: the oldest version among its model tokens (-1: none)
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from flywheel.rollout.stream import Group
from flywheel.types import TrainBatch

SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("position", pa.int64()),
        ("index", pa.int64()),
        ("env", pa.string()),
        ("prompt", pa.string()),
        ("prompt_ids", pa.list_(pa.int64())),
        ("completion", pa.string()),
        ("completion_ids", pa.list_(pa.int64())),
        ("completion_tokens", pa.list_(pa.string())),
        ("engine_logprobs", pa.list_(pa.float64())),
        ("trainer_logprobs", pa.list_(pa.float64())),
        ("advantages", pa.list_(pa.float64())),
        ("returns", pa.list_(pa.float64())),
        ("old_values", pa.list_(pa.float64())),
        ("reward", pa.float64()),
        ("sub_rewards", pa.string()),
        ("guard_flags", pa.list_(pa.string())),
        ("weight_versions", pa.list_(pa.int64())),
        ("loss_mask", pa.list_(pa.int64())),
        ("turns", pa.int64()),
        ("tool_calls", pa.int64()),
        ("valid", pa.bool_()),
        ("error", pa.string()),
        ("truncated", pa.bool_()),
        ("weight_version", pa.int64()),
    ]
)


def rollout_rows(step: int, env: str, groups: list[Group], batch: TrainBatch, trainer_logprobs: torch.Tensor, tokenizer) -> list[dict]:
    """One row per episode of ``groups`` (row b of ``batch`` and ``trainer_logprobs`` is the b-th episode)."""
    rows, b = [], 0
    for group in groups:
        notes = group.notes or [{"sub_rewards": {}, "guard_flags": []}] * len(group.episodes)
        for index, (episode, note) in enumerate(zip(group.episodes, notes)):
            c, start = episode.completion, len(episode.prompt_ids)
            span = slice(start, start + len(c.token_ids))
            rows.append(
                {
                    "step": step,
                    "position": group.position,
                    "index": index,
                    "env": env,
                    "prompt": tokenizer.decode(episode.prompt_ids),
                    "prompt_ids": list(episode.prompt_ids),
                    "completion": c.text,
                    "completion_ids": list(c.token_ids),
                    "completion_tokens": [tokenizer.decode([t]) for t in c.token_ids],
                    "engine_logprobs": list(c.logprobs),
                    "trainer_logprobs": trainer_logprobs[b, span].tolist(),
                    "advantages": batch.advantages[b, span].tolist(),
                    "returns": [] if batch.returns is None else batch.returns[b, span].tolist(),
                    "old_values": [] if batch.old_values is None else batch.old_values[b, span].tolist(),
                    "reward": episode.reward,
                    "sub_rewards": json.dumps(note["sub_rewards"]),
                    "guard_flags": list(note["guard_flags"]),
                    "weight_versions": [-1 if v is None else v for v in c.weight_versions],
                    "loss_mask": [int(m) for m in batch.loss_mask[b, span].tolist()],
                    "turns": getattr(episode, "turns", 1),
                    "tool_calls": getattr(episode, "tool_calls", 0),
                    "valid": episode.valid,
                    "error": episode.error,
                    "truncated": c.truncated,
                    "weight_version": c.weight_version,
                }
            )
            b += 1
    return rows


def write_rollouts(path: Path, rows: list[dict]) -> None:
    """Writes the rows (``rollout_rows``) as one Parquet file, atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), partial)
    partial.replace(path)


def dump_path(run_dir: Path, step: int) -> Path:
    return run_dir / "rollouts" / f"step_{step:06d}.parquet"
