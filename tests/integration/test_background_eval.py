"""eval.engines: the periodic eval on a replica of its own measures what the run's engine measures, at
the same steps, in rows of its own, while the run trains exactly as without it."""

import json
from pathlib import Path

from helpers import SYNC, undocumented_metrics

from flywheel.config import load_config
from flywheel.controller import train

REPO = Path(__file__).resolve().parents[2]


def run(fresh_workers, tmp_path: Path, name: str, *extra: str) -> list[dict]:
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.steps=2",
            "rollout.prompts_per_step=8",
            "rollout.max_staleness=0",
            "task.eval_size=24",
            "eval.every=1",
            "run.progress=false",
            f"run.output_dir={tmp_path}",
            f"run.name={name}",
            *extra,
        ],
    )
    run_dir = train(config, fresh_workers(config))
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_eval_on_its_own_engine_equals_eval_on_the_runs_engine(fresh_workers, tmp_path):
    inline = run(fresh_workers, tmp_path, "inline")
    own = run(fresh_workers, tmp_path, "own", "eval.engines=1")
    assert not undocumented_metrics(own)
    evals = {r["step"]: r for r in own if "eval/accuracy" in r}
    trained = [r for r in own if "loss/policy" in r]
    assert sorted(evals) == [0, 1, 2] and [r["step"] for r in trained] == [1, 2]
    assert all("eval/accuracy" not in r for r in trained)  # the eval rows are rows of their own
    for step, row in evals.items():
        assert row["weights/version"] == step  # synchronous: the version of step s is s
        same = next(r for r in inline if r["step"] == step)
        assert (row["eval/accuracy"], row["eval/greedy_accuracy"]) == (same["eval/accuracy"], same["eval/greedy_accuracy"])
    for mine, theirs in zip(trained, inline[1:], strict=True):  # training did not change
        assert (mine["loss/policy"], mine["reward/mean"], mine["train/grad_norm"]) == (
            theirs["loss/policy"],
            theirs["reward/mean"],
            theirs["train/grad_norm"],
        )
