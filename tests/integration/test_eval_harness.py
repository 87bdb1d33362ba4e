"""flywheel eval on the session's engine: pass@k, maj@k, mean@k recomputed from the per-task samples."""

import itertools
import json

import pytest

from flywheel.config import ConfigError
from flywheel.eval.harness import EvalRequest, eval_config, evaluate_on, resolve_checkpoint


def test_eval_report_matches_its_samples(initial_engine, config, tmp_path):
    config = config.model_copy(update={"task": config.task.model_copy(update={"eval_size": 16})})
    request = EvalRequest(k=2, n=4, resamples=200)
    report = evaluate_on(config, [initial_engine], request, tmp_path / "report.json")
    assert json.loads((tmp_path / "report.json").read_text()) == {key: value for key, value in report.items() if key != "path"}
    rows = [json.loads(line) for line in (tmp_path / "report.tasks.jsonl").read_text().splitlines()]
    assert report["tasks"] == len(rows) > 10 and report["n"] == 4 and report["k"] == 2
    for row in rows:
        assert len(row["rewards"]) == len(row["answers"]) == 4
        correct = [r >= 1.0 for r in row["rewards"]]
        pairs = list(itertools.combinations(correct, 2))
        assert row["pass@2"] == pytest.approx(sum(any(p) for p in pairs) / len(pairs))  # the definition over all 2-subsets
        assert row["mean@2"] == pytest.approx(sum(row["rewards"][:2]) / 2)
        assert row["answers"][0] != "" or row["rewards"][0] == 0.0
    for name in ("pass@2", "maj@2", "mean@2"):
        m = report["metrics"][name]
        assert m["value"] == pytest.approx(sum(r[name] for r in rows) / len(rows))
        assert m["ci_low"] <= m["value"] <= m["ci_high"]
    assert report["metrics"]["pass@2"]["value"] >= report["metrics"]["mean@2"]["value"]
    assert 0.0 < report["metrics"]["mean@2"]["value"] < 1.0  # the shipped model solves some, not all
    again = evaluate_on(config, [initial_engine], request, tmp_path / "again.json")  # seeded: the same samples
    assert again["metrics"] == report["metrics"]


def test_checkpoint_resolution(tmp_path, config):
    run = tmp_path / "run"
    for step in (5, 10):
        (run / "checkpoints" / f"step_{step}").mkdir(parents=True)
        (run / "checkpoints" / f"step_{step}" / "config.json").write_text("{}")
    assert resolve_checkpoint(str(run)) == run / "checkpoints" / "step_10"  # newest, not the first in name order
    (run / "final").mkdir()
    (run / "final" / "config.json").write_text("{}")
    assert resolve_checkpoint(str(run)) == run / "final"
    with pytest.raises(ConfigError, match="neither a model directory"):
        resolve_checkpoint(str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="no tokenizer files"):  # a model directory without tokenizer files is refused before engines start
        eval_config(config, str(run), EvalRequest())
    with pytest.raises(ConfigError, match="--n at least k"):
        eval_config(config, None, EvalRequest(k=4, n=2))
