"""One Ray instance and one vLLM engine for the whole test session; a fresh trainer per test."""

from pathlib import Path

import pytest
import ray

from flywheel.config import Config, load_config
from flywheel.controller import Workers, start_workers
from flywheel.trainer.trainer import Trainer
from flywheel.weights import shm

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def config() -> Config:
    return load_config(REPO / "configs/quickstart.yaml", ["run.progress=false"])


@pytest.fixture(scope="session")
def shared_workers(config):
    workers = start_workers(config)
    yield workers
    workers.shutdown()
    ray.shutdown()


def fresh_workers(shared: Workers, config: Config) -> Workers:
    """The session's engine with a new trainer (initial model) whose version-0 weights the engine loads."""
    trainer = ray.remote(Trainer).options(num_cpus=1).remote(config, str(shm.default_directory()) + "-test")
    workers = Workers(shared.engine, trainer)
    workers.sync_weights()
    return workers
