"""Every tracker fed the same metric rows (non-finite values among them), each read back from what it
wrote: metrics.jsonl, TensorBoard's event files, the MLflow store, the W&B offline log, and an HTTP
scrape of the Prometheus endpoint while it runs."""

import json
import math
import socket
import sys
import urllib.request
from pathlib import Path

import pytest

from flywheel.config import ConfigError, load_config
from flywheel.monitor.trackers import PrometheusTracker, Trackers, prometheus_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from wandb_records import wandb_history  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ROWS = [
    {"step": 1, "reward/mean": 0.25, "loss/policy": -0.5, "train/grad_norm": 1.5, "engines/live": 1},
    {"step": 2, "reward/mean": 0.5, "loss/policy": math.nan, "train/grad_norm": math.inf, "engines/live": 1},
    {"step": 3, "reward/mean": 0.75, "loss/policy": 0.125, "train/grad_norm": 2.0, "engines/live": 2},
]


def scrape(url: str) -> dict[str, float]:
    """The endpoint's samples: name -> value (comments skipped)."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {name: float(value) for name, value in (line.split(" ") for line in text.splitlines() if line and not line.startswith("#"))}


def test_every_tracker_reads_back_what_it_was_given(tmp_path):
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = load_config(REPO / "configs/quickstart.yaml", ["monitor.trackers=[tensorboard,mlflow,wandb,prometheus]"])
    trackers = Trackers(tmp_path, config)
    [line] = trackers.describe()
    url = (tmp_path / "prometheus.txt").read_text().strip()
    assert line == f"prometheus metrics at {url}" and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    for row in ROWS[:2]:
        trackers.log(row, row["step"])
    samples = scrape(url)
    assert samples["flywheel_step"] == 2 and samples["flywheel_reward_mean"] == 0.5 and samples["flywheel_engines_live"] == 1
    assert math.isnan(samples["flywheel_loss_policy"]) and samples["flywheel_train_grad_norm"] == math.inf
    trackers.log(ROWS[2], 3)
    assert scrape(url)["flywheel_train_grad_norm"] == 2.0
    trackers.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)  # the endpoint is gone

    written = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss/policy"] for r in written] == [-0.5, "nan", 0.125] and written[1]["train/grad_norm"] == "inf"

    finite = {1: -0.5, 3: 0.125}  # the other trackers skip non-finite values
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert {e.step: e.value for e in events.Scalars("loss/policy")} == finite
    assert {e.step: e.value for e in events.Scalars("reward/mean")} == {1: 0.25, 2: 0.5, 3: 0.75}

    client = MlflowClient(tracking_uri=(tmp_path / "mlflow").resolve().as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("flywheel").experiment_id])
    assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss/policy")} == finite
    assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/grad_norm")} == {1: 1.5, 3: 2.0}

    [log] = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    history = wandb_history(log)
    assert {h["_step"]: h["loss/policy"] for h in history if "loss/policy" in h} == finite
    assert {h["_step"]: h["engines/live"] for h in history} == {1: 1, 2: 1, 3: 2}


def test_prometheus_names_keep_only_letters_digits_and_underscores():
    assert prometheus_name("reward/mean") == "flywheel_reward_mean"
    assert prometheus_name("hacking/judge-injection_rate") == "flywheel_hacking_judge_injection_rate"
    assert prometheus_name("eval/tools/call_rate") == "flywheel_eval_tools_call_rate"


def test_an_unknown_tracker_is_a_config_error():
    with pytest.raises(ConfigError, match=r"bad value for 'monitor.trackers.0'.*'jsonl', 'tensorboard', 'mlflow', 'wandb' or 'prometheus'"):
        load_config(REPO / "configs/quickstart.yaml", ["monitor.trackers=[neptune]"])


def test_a_busy_prometheus_port_is_one_sentence_naming_the_key(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            RuntimeError, match=rf"^monitor.prometheus_port: cannot serve Prometheus metrics on 127.0.0.1:{port} \(.+\); choose another port"
        ):
            PrometheusTracker(tmp_path, "127.0.0.1", port)
    assert not (tmp_path / "prometheus.txt").exists()
