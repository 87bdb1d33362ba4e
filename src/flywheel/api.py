"""The Python API: ``from flywheel import Config, train, evaluate`` - one call from a notebook or a script.

    from flywheel import train
    result = train("configs/quickstart.yaml", {"run.steps": 20})
    result.run_dir, result.metrics[-1]["eval/accuracy"]

A config is a ``Config``, a dict shaped like the YAML file, or a YAML path; ``overrides`` are dotted keys
(a dict or ``["section.key=value", ...]``), checked as the command line checks them. Errors are raised
(``ConfigError`` with one sentence; the controller's own exceptions for a stopped or failed run).
Called where an event loop runs (a Jupyter cell), the run goes to a worker thread and the call waits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flywheel.config import Config, config_from_dict
from flywheel.monitor.metrics import read_metrics
from flywheel.preflight import check_config, load_run_config

ConfigLike = Config | dict[str, Any] | str | Path | None
Overrides = dict[str, Any] | list[str] | tuple[str, ...]


@dataclass(frozen=True)
class RunResult:
    """A finished run: its directory and every row of its metrics.jsonl (eval rows included)."""

    run_dir: Path
    metrics: list[dict[str, Any]]

    @property
    def final_model(self) -> Path:
        return self.run_dir / "final"

    def last(self, name: str) -> Any:
        """The last logged value of a metric (KeyError if it was never logged)."""
        for row in reversed(self.metrics):
            if name in row:
                return row[name]
        raise KeyError(f"metric {name!r} was never logged in {self.run_dir / 'metrics.jsonl'}")


def as_config(config: ConfigLike = None, overrides: Overrides = ()) -> Config:
    """A validated Config from any ConfigLike and dotted overrides, checked as the command line checks it."""
    dotted = [f"{key}={json.dumps(value)}" for key, value in overrides.items()] if isinstance(overrides, dict) else list(overrides)
    if isinstance(config, Config):
        return check_config(config_from_dict(config.model_dump(mode="json"), dotted) if dotted else config)
    if isinstance(config, dict):
        return check_config(config_from_dict(config, dotted))
    return load_run_config(config, dotted)


def _off_the_event_loop(call: Callable[[], Any]) -> Any:
    """``call()`` here, or in a worker thread when this thread runs an event loop (a Jupyter kernel
    does): the run drives an event loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with ThreadPoolExecutor(1, thread_name_prefix="flywheel") as pool:
        return pool.submit(call).result()


def train(config: ConfigLike = None, overrides: Overrides = ()) -> RunResult:
    """Runs training (``flywheel train``) in this process and returns the run's directory and metrics.
    ``run.supervise`` restarts a lost trainer rank as the command line does."""
    from flywheel.controller import train as run_loop
    from flywheel.reward_check import check_at_start
    from flywheel.supervisor import supervise

    resolved = as_config(config, overrides)
    check_at_start(resolved)
    run_dir = _off_the_event_loop(lambda: supervise(resolved) if resolved.run.supervise else run_loop(resolved))
    return RunResult(Path(run_dir), read_metrics(Path(run_dir) / "metrics.jsonl"))


def evaluate(
    config: ConfigLike = None,
    overrides: Overrides = (),
    *,
    checkpoint: str | Path | None = None,
    k: int = 1,
    n: int | None = None,
    engines: int | None = None,
    output: str | Path | None = None,
) -> dict[str, Any]:
    """``flywheel eval``: pass@k, maj@k and mean@k (with bootstrap intervals) of a checkpoint (a model
    directory or a run directory; None: the config's model) on the environment's held-out split.
    Returns the report, whose ``path`` is the JSON file written."""
    from flywheel.eval.harness import EvalRequest, evaluate_checkpoint

    request = EvalRequest(k=k, n=n, engines=engines, output=None if output is None else str(output))
    resolved = as_config(config, overrides)
    return _off_the_event_loop(lambda: evaluate_checkpoint(resolved, None if checkpoint is None else str(checkpoint), request))
