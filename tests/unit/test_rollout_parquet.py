"""Rollout dump rows from hand-made groups (a two-turn episode with environment tokens, an invalid
one, a truncated one) and the batch build_batch makes of them: every value checked, then the file
read back with the contract's schema."""

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoTokenizer

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.config import load_config
from flywheel.monitor.rollout_parquet import SCHEMA, dump_path, rollout_rows, write_rollouts
from flywheel.rollout.group import EnvEpisode
from flywheel.rollout.stream import Group
from flywheel.types import Completion

REPO = Path(__file__).resolve().parents[2]


def env_episode(completion: Completion, reward: float, turns: int = 1, tool_calls: int = 0, error: str | None = None) -> EnvEpisode:
    return EnvEpisode([4, 5], completion, reward, error=error, turns=turns, tool_calls=tool_calls, tool_errors=0, stop_reason="done", messages=())


def test_rows_follow_the_batch_and_the_contract(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(REPO / "assets/tiny-adder")
    # model turn [6, 7] (version 2), environment turn [8] (no version, logprob 0), model turn [9] (version 3)
    two_turns = Completion([6, 7, 8, 9], [-0.1, -0.2, 0.0, -0.3], "67 89", (2, 2, None, 3), loss_mask=(1, 1, 0, 1))
    plain = Completion([6, 1], [-0.4, -0.5], "6", (3, 3))
    truncated = Completion([7, 7, 7], [-0.6, -0.7, -0.8], "777", (3, 3, 3), truncated=True)
    groups = [
        Group(
            5,
            [env_episode(two_turns, 1.0, turns=2, tool_calls=1), env_episode(plain, 0.0)],
            notes=[
                {"sub_rewards": {"env": 1.0, "pipeline": 1.0}, "guard_flags": []},
                {"sub_rewards": {"env": 0.0, "pipeline": 0.0}, "guard_flags": ["length_padding"]},
            ],
        ),
        Group(9, [env_episode(truncated, 0.0), env_episode(plain, float("nan"), error="env_error")]),
    ]
    config = load_config(None, ["rollout.group_size=2"])  # grpo
    batch = asyncio.run(build_batch([g.episodes for g in groups], make_algorithm(config.algorithm), pad_id=0, trainer=None))
    trainer_logprobs = -torch.arange(24, dtype=torch.float).view(4, 6) / 10  # row b, position t: -(6b + t) / 10
    rows = rollout_rows(7, "calculator", groups, batch, trainer_logprobs, tokenizer)

    assert [(r["step"], r["position"], r["index"], r["env"]) for r in rows] == [
        (7, 5, 0, "calculator"),
        (7, 5, 1, "calculator"),
        (7, 9, 0, "calculator"),
        (7, 9, 1, "calculator"),
    ]
    first = rows[0]
    assert first["prompt_ids"] == [4, 5] and first["prompt"] == tokenizer.decode([4, 5])
    assert (first["completion"], first["completion_ids"]) == ("67 89", [6, 7, 8, 9])
    assert first["completion_tokens"] == [tokenizer.decode([t]) for t in [6, 7, 8, 9]]
    assert first["engine_logprobs"] == [-0.1, -0.2, 0.0, -0.3]
    assert first["trainer_logprobs"] == pytest.approx([-0.2, -0.3, -0.4, -0.5])  # positions 2-5 of row 0
    assert rows[1]["trainer_logprobs"] == pytest.approx([-0.8, -0.9])  # positions 2-3 of row 1
    assert first["weight_versions"] == [2, 2, -1, 3] and first["weight_version"] == 2
    assert first["loss_mask"] == [1, 1, 0, 1]
    # GRPO on [1, 0]: mean 0.5, sample std sqrt(0.5) -> +-0.5 / (sqrt(0.5) + 1e-6) = +-0.7071058 on the trained tokens
    a = 0.5 / (0.5**0.5 + 1e-6)
    assert first["advantages"] == pytest.approx([a, a, 0.0, a], abs=1e-7)
    assert rows[1]["advantages"] == pytest.approx([-a, -a], abs=1e-7)
    assert all(r["returns"] == r["old_values"] == [] for r in rows)  # no critic
    assert (first["turns"], first["tool_calls"], first["reward"]) == (2, 1, 1.0)
    assert json.loads(first["sub_rewards"]) == {"env": 1.0, "pipeline": 1.0} and rows[1]["guard_flags"] == ["length_padding"]
    # group 9: one valid episode, so its advantage is 0; the invalid one is out of the loss
    assert rows[2]["truncated"] and rows[2]["advantages"] == [0.0] * 3 and rows[2]["loss_mask"] == [1, 1, 1]
    invalid = rows[3]
    assert (invalid["valid"], invalid["error"], invalid["loss_mask"], invalid["sub_rewards"], invalid["guard_flags"]) == (
        False,
        "env_error",
        [0, 0],
        "{}",
        [],
    )
    assert all(r["valid"] and r["error"] is None for r in rows[:3])

    path = dump_path(tmp_path, 7)
    write_rollouts(path, rows)
    assert path == tmp_path / "rollouts/step_000007.parquet" and [p.name for p in path.parent.iterdir()] == [path.name]
    table = pq.read_table(path)
    assert table.schema.equals(SCHEMA)
    back = table.to_pylist()
    assert back[:3] == rows[:3] and back[3]["reward"] != back[3]["reward"]  # NaN survives
