"""The refactor guard: 20 quickstart steps (fp32, CPU, synchronous) reproduce the golden per-step
numbers (``helpers.assert_matches_golden``: rewards exactly, the floats to rel 1e-4 across CPU
instruction sets). A change meant to move numbers regenerates the file on purpose:

    FLYWHEEL_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/integration/test_golden.py
"""

import json
import os
from pathlib import Path

from helpers import GOLDEN, SYNC, assert_matches_golden, golden_view, undocumented_metrics

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]


def test_quickstart_reproduces_the_golden_numbers(fresh_workers, tmp_path):
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [*SYNC, "run.steps=20", "eval.every=100", "eval.greedy=false", "run.progress=false", f"run.output_dir={tmp_path}"],
    )
    run_dir = train(config, fresh_workers(config))
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][1:]
    assert not undocumented_metrics(rows), undocumented_metrics(rows)
    if os.environ.get("FLYWHEEL_WRITE_GOLDEN"):
        GOLDEN.write_text("".join(json.dumps(row) + "\n" for row in golden_view(rows)))
    assert len(rows) == 20
    assert_matches_golden(rows)
