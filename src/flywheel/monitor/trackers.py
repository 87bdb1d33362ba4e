"""Where each step's metrics go: metrics.jsonl always, plus the trackers of ``monitor.trackers``.

    jsonl         metrics.jsonl (monitor/metrics.py)
    tensorboard   tensorboard/: event files (torch.utils.tensorboard's SummaryWriter), one scalar per metric
    mlflow        mlflow/: a local MLflow file store (experiment "flywheel", one run named after the run
                  directory); browse with ``mlflow ui --backend-store-uri RUN_DIR/mlflow``
    wandb         wandb/: an offline Weights & Biases run (no network); upload later with ``wandb sync``
    prometheus    an HTTP endpoint (monitor.prometheus_host:port, 127.0.0.1 by default) serving one gauge
                  per metric, named flywheel_<metric> with every character outside [a-zA-Z0-9_] as "_";
                  its URL is written to prometheus.txt

Each tracker has ``log(row, step)`` and ``close()``. Only numbers are logged (the ``step`` key is the
step itself); a non-finite value is written by jsonl as a string, skipped by tensorboard, mlflow and
wandb, and set as NaN/Inf on its Prometheus gauge. The tracker libraries are imported only when chosen.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Protocol

from flywheel.config import Config
from flywheel.monitor.metrics import MetricsLog


class Tracker(Protocol):
    def log(self, row: dict, step: int) -> None: ...

    def close(self) -> None: ...


def numbers(row: dict, finite: bool) -> dict[str, float]:
    """The row's numeric metrics (``step`` and booleans aside), only the finite ones when ``finite``."""
    picked = {k: float(v) for k, v in row.items() if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)}
    return {k: v for k, v in picked.items() if math.isfinite(v)} if finite else picked


class JsonlTracker:
    def __init__(self, run_dir: Path) -> None:
        self.log_file = MetricsLog(run_dir / "metrics.jsonl")

    def log(self, row: dict, step: int) -> None:
        self.log_file.write(row)

    def close(self) -> None:
        self.log_file.close()


class TensorBoardTracker:
    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, row: dict, step: int) -> None:
        for name, value in numbers(row, finite=True).items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MlflowTracker:
    """A run in a file store under the run directory, through MlflowClient (no global MLflow state).
    MLflow 3 keeps its file store in maintenance mode behind MLFLOW_ALLOW_FILE_STORE; a database store
    would need SQLAlchemy and Alembic, which mlflow-skinny leaves out."""

    def __init__(self, run_dir: Path) -> None:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=(run_dir / "mlflow").resolve().as_uri())
        experiment = self.client.get_experiment_by_name("flywheel")
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment("flywheel")
        self.run_id = self.client.create_run(experiment_id, run_name=run_dir.name).info.run_id

    def log(self, row: dict, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in numbers(row, finite=True).items()]
        for i in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class WandbTracker:
    """An offline run in run_dir/wandb (WANDB_MODE=offline: nothing leaves the machine)."""

    def __init__(self, run_dir: Path, config: Config) -> None:
        os.environ["WANDB_MODE"] = "offline"
        import wandb

        settings = wandb.Settings(mode="offline", silent=True, console="off", x_disable_stats=True, x_disable_machine_info=True)
        self.run = wandb.init(
            project="flywheel", name=run_dir.name, dir=str(run_dir), config=config.model_dump(mode="json"), settings=settings, reinit="create_new"
        )

    def log(self, row: dict, step: int) -> None:
        self.run.log(numbers(row, finite=True), step=step)

    def close(self) -> None:
        self.run.finish()


def prometheus_name(metric: str) -> str:
    """``flywheel_`` + the metric name with every character outside [a-zA-Z0-9_] replaced by ``_``."""
    return "flywheel_" + re.sub(r"[^a-zA-Z0-9_]", "_", metric)


class PrometheusTracker:
    """A gauge per metric (its latest value) on an HTTP endpoint of its own registry."""

    def __init__(self, run_dir: Path, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry, self.gauges = CollectorRegistry(), {}
        try:
            self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            raise RuntimeError(
                f"monitor.prometheus_port: cannot serve Prometheus metrics on {host}:{port} ({error.strerror or error}); "
                "choose another port, or 0 for a free one"
            ) from None
        self.url = f"http://{host}:{self.server.server_port}/metrics"
        (run_dir / "prometheus.txt").write_text(self.url + "\n")

    def log(self, row: dict, step: int) -> None:
        from prometheus_client import Gauge

        for name, value in ({"step": float(step)} | numbers(row, finite=False)).items():
            key = prometheus_name(name)
            if key not in self.gauges:
                self.gauges[key] = Gauge(key, f"flywheel metric {name}", registry=self.registry)
            self.gauges[key].set(value)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Trackers:
    """Every tracker of the config; ``log`` and ``close`` reach them all (metrics.jsonl first)."""

    def __init__(self, run_dir: Path, config: Config) -> None:
        m = config.monitor
        makers = {
            "tensorboard": lambda: TensorBoardTracker(run_dir),
            "mlflow": lambda: MlflowTracker(run_dir),
            "wandb": lambda: WandbTracker(run_dir, config),
            "prometheus": lambda: PrometheusTracker(run_dir, m.prometheus_host, m.prometheus_port),
        }
        self.trackers: list[Tracker] = [JsonlTracker(run_dir)]
        try:
            self.trackers += [makers[name]() for name in dict.fromkeys(m.trackers) if name != "jsonl"]
        except BaseException:
            self.close()
            raise

    def log(self, row: dict, step: int) -> None:
        for tracker in self.trackers:
            tracker.log(row, step)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()

    def describe(self) -> list[str]:
        """A line for the terminal per tracker with somewhere to look (the Prometheus URL)."""
        return [f"prometheus metrics at {t.url}" for t in self.trackers if isinstance(t, PrometheusTracker)]
