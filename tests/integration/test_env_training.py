"""flywheel's loop on a multi-turn tool environment: the calculator with the shipped tiny-calc model."""

import json
from pathlib import Path

import pytest
from helpers import undocumented_metrics

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rl_on_the_calculator_raises_tool_use_and_accuracy(shared_engine, tmp_path):  # its own engine: another model
    config = load_config(
        REPO / "configs/calculator.yaml",
        ["run.progress=false", "run.steps=10", "eval.every=10", "run.checkpoint_every=10", f"run.output_dir={tmp_path}"],
    )
    rows = [json.loads(line) for line in (train(config) / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[0], rows[-1]
    assert not undocumented_metrics(rows), undocumented_metrics(rows)
    print({k: (first[k], last[k]) for k in ("eval/tools/call_rate", "eval/accuracy", "eval/greedy_accuracy")})
    assert last["eval/tools/call_rate"] >= first["eval/tools/call_rate"] + 0.1
    assert last["eval/accuracy"] >= first["eval/accuracy"] + 0.1
    for row in rows[1:]:
        # environment tokens are in the sequences but not in the loss: trainer and engine agree on the model's
        assert row["train/mismatch_kl"] < 1e-3 and row["env/turns_mean"] >= 1 and 0 <= row["tools/error_rate"] <= 1
