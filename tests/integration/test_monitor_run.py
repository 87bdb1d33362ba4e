"""One short real run with every tracker, rollout dumps and the timeline on; each test reads back
one of its outputs: the Parquet dump (columns, lengths, logprobs, advantages), timeline.jsonl (every
actor, nesting, the Gantt chart) and what TensorBoard, MLflow and W&B wrote."""

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from helpers import SYNC, undocumented_metrics
from transformers import AutoTokenizer
from wandb_records import wandb_history

from flywheel.algorithms import make_algorithm
from flywheel.config import load_config
from flywheel.controller import train
from flywheel.monitor.gantt import render_gantt
from flywheel.monitor.metrics import read_metrics
from flywheel.monitor.rollout_parquet import SCHEMA
from flywheel.timeline import read_timeline

REPO = Path(__file__).resolve().parents[2]
PROMPTS, GROUP, STEPS = 8, 8, 3
COLUMNS = (
    "step position index env prompt prompt_ids completion completion_ids completion_tokens engine_logprobs trainer_logprobs advantages "
    "returns old_values reward sub_rewards guard_flags weight_versions loss_mask turns tool_calls valid error truncated weight_version"
).split()
_RUN: dict = {}


@pytest.fixture
def run(fresh_workers, tmp_path_factory):
    """(run directory, config) of the module's one run: 3 steps, dumps every 2, a checkpoint at step 2."""
    if not _RUN:
        overrides = [
            *SYNC,
            f"run.steps={STEPS}",
            f"rollout.prompts_per_step={PROMPTS}",
            f"rollout.group_size={GROUP}",
            "eval.every=100",
            "eval.greedy=false",
            "task.eval_size=16",
            "run.checkpoint_every=2",
            "monitor.dump_every=2",
            "monitor.trackers=[jsonl,tensorboard,mlflow,wandb,prometheus]",
            "run.progress=false",
            f"run.output_dir={tmp_path_factory.mktemp('monitor')}",
        ]
        config = load_config(REPO / "configs/quickstart.yaml", overrides)
        _RUN.update(dir=train(config, fresh_workers(config)), config=config)
    return _RUN["dir"], _RUN["config"]


def test_the_dump_holds_every_trained_episode_of_its_step(run):
    run_dir, config = run
    assert sorted(p.name for p in (run_dir / "rollouts").iterdir()) == ["step_000002.parquet"]
    table = pq.read_table(run_dir / "rollouts/step_000002.parquet")
    assert table.column_names == COLUMNS and table.schema.equals(SCHEMA)
    rows = table.to_pylist()
    assert len(rows) == PROMPTS * GROUP
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    positions = [r["position"] for r in rows[::GROUP]]
    assert positions == sorted(positions) and len(set(positions)) == PROMPTS  # batch order: groups by position
    for i, r in enumerate(rows):
        n = len(r["completion_ids"])
        assert (r["step"], r["index"], r["env"], r["position"]) == (2, i % GROUP, "arithmetic", positions[i // GROUP])
        lists = ("completion_tokens", "engine_logprobs", "trainer_logprobs", "advantages", "weight_versions", "loss_mask")
        assert [len(r[key]) for key in lists] == [n] * len(lists), i
        assert r["prompt"] == tokenizer.decode(r["prompt_ids"]) and r["completion"] == tokenizer.decode(r["completion_ids"], skip_special_tokens=True)
        assert r["completion_tokens"] == [tokenizer.decode([t]) for t in r["completion_ids"]]
        assert r["weight_versions"] == [1] * n and r["weight_version"] == 1  # synchronous: sampled by step 1's weights
        assert r["loss_mask"] == [1] * n and r["valid"] and r["error"] is None and (r["turns"], r["tool_calls"]) == (1, 0)
        assert json.loads(r["sub_rewards"]) == {"env": r["reward"]} and r["guard_flags"] == []
        # fp32, the same weights: the trainer's logprobs before its update are the engine's
        assert max(abs(a - b) for a, b in zip(r["engine_logprobs"], r["trainer_logprobs"])) < 1e-4, i
    rewards = torch.tensor([r["reward"] for r in rows]).view(PROMPTS, GROUP)
    expected = make_algorithm(config.algorithm).advantages(rewards, None).flatten()
    for r, advantage in zip(rows, expected.tolist()):
        assert r["advantages"] == pytest.approx([advantage] * len(r["completion_ids"]), abs=1e-6)
    [step2] = [m for m in read_metrics(run_dir / "metrics.jsonl") if m["step"] == 2]
    assert sum(r["reward"] for r in rows) / len(rows) == pytest.approx(step2["reward/mean"])
    assert sum(len(r["completion_ids"]) for r in rows) / len(rows) == pytest.approx(step2["rollout/response_length_mean"])


def test_the_timeline_has_every_actor_and_the_trainer_inside_the_controllers_train(run):
    run_dir, _ = run
    spans = read_timeline(run_dir / "timeline.jsonl")
    stages = {(s.actor, s.stage) for s in spans}
    expected = {("controller", stage) for stage in ("wait_for_batch", "train", "sync", "eval", "checkpoint")} | {
        ("trainer", stage) for stage in ("forward", "backward", "optimizer", "publish")
    }
    expected |= {("engine-0", stage) for stage in ("generate", "load_weights", "pause")} | {("reward", "scoring"), ("env", "steps")}
    assert stages == expected
    assert all(0 <= s.start_s <= s.end_s for s in spans)
    for step in range(1, STEPS + 1):
        [train_span] = [s for s in spans if (s.actor, s.stage, s.step) == ("controller", "train", step)]
        inside = [s for s in spans if s.actor == "trainer" and s.step == step and s.stage != "publish"]
        assert {s.stage for s in inside} == {"forward", "backward", "optimizer"}
        assert all(train_span.start_s - 1e-3 <= s.start_s <= s.end_s <= train_span.end_s + 1e-3 for s in inside), step
        [sync] = [s for s in spans if (s.actor, s.stage, s.step) == ("controller", "sync", step)]
        [publish] = [s for s in spans if (s.actor, s.stage, s.step) == ("trainer", "publish", step)]
        assert sync.start_s <= publish.start_s <= publish.end_s <= sync.end_s
        [wait] = [s for s in spans if (s.actor, s.stage, s.step) == ("controller", "wait_for_batch", step)]
        assert wait.end_s <= train_span.start_s + 1e-3
    svg = ET.fromstring(render_gantt(spans))
    bars = [e for e in svg.iter("{http://www.w3.org/2000/svg}rect") if e.find("{http://www.w3.org/2000/svg}title") is not None]
    assert len(bars) == len(spans)
    lanes = [e.text for e in svg.iter("{http://www.w3.org/2000/svg}text") if e.get("x") == "4"]
    assert lanes == ["controller", "trainer", "engine-0", "reward", "env"]


def test_tensorboard_mlflow_and_wandb_hold_the_metrics_of_every_step(run):
    run_dir, _ = run
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = read_metrics(run_dir / "metrics.jsonl")
    assert not undocumented_metrics(rows), undocumented_metrics(rows)
    want = {r["step"]: r["reward/mean"] for r in rows if "reward/mean" in r}
    assert sorted(want) == list(range(1, STEPS + 1))
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert {e.step: e.value for e in events.Scalars("reward/mean")} == pytest.approx(want)
    assert [e.step for e in events.Scalars("eval/accuracy")] == [0, STEPS]

    client = MlflowClient(tracking_uri=(run_dir / "mlflow").resolve().as_uri())
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("flywheel").experiment_id])
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == run_dir.name
    assert {m.step: m.value for m in client.get_metric_history(mlflow_run.info.run_id, "reward/mean")} == pytest.approx(want)

    [wandb_file] = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    history = wandb_history(wandb_file)
    assert {h["_step"]: h["reward/mean"] for h in history if "reward/mean" in h} == pytest.approx(want)
    assert all(math.isfinite(v) for h in history for v in h.values())
    assert (run_dir / "prometheus.txt").read_text().startswith("http://127.0.0.1:")
