"""One Ray instance and one vLLM engine for the whole test session; a fresh trainer per test."""

import os
from pathlib import Path

import pytest
import ray
from helpers import SYNC

from flywheel.cluster.workers import Workers, engine_group, start_engines, start_trainer, trainer_spec
from flywheel.config import Config, load_config
from flywheel.weights import open_transport


@pytest.fixture(scope="session")
def config() -> Config:
    return load_config(Path(__file__).resolve().parents[2] / "configs/quickstart.yaml", [*SYNC, "run.progress=false"])


@pytest.fixture(scope="session")
def shared_engine(config):
    os.environ.setdefault("RAY_worker_niceness", "0")  # as flywheel's own Ray (cluster/workers.py)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="error")  # room for extra replicas
    [engine] = start_engines(engine_group(config))
    yield engine
    engine.shutdown()
    ray.shutdown()


@pytest.fixture
def fresh_workers(shared_engine):
    """Factory: the session's engine with a new trainer (initial model, publishing through the config's
    transport) whose weights the engine loads.

    One trainer lives at a time (Ray has a CPU for the engine and one for a trainer): making a new
    one retires the previous one.
    """
    trainers = []

    def retire() -> None:
        while trainers:
            trainer = trainers.pop()
            trainer.shutdown()

    def make(config: Config) -> Workers:
        retire()
        trainers.append(start_trainer(trainer_spec(config), open_transport(config.weights, engines=1)))
        workers = Workers([shared_engine], trainers[-1])
        workers.sync_weights()
        return workers

    yield make
    retire()


@pytest.fixture
def initial_engine(fresh_workers, config):
    """The session's engine serving the shipped model's initial weights (an earlier test may have
    trained and synced others)."""
    return fresh_workers(config).engines[0]
