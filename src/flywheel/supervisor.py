"""The supervisor (``run.supervise``): a run whose trainer rank dies resumes from its latest
checkpoint in the same run directory, with a new trainer group, up to ``run.max_restarts`` times.

The engines stay up across restarts (they lost nothing: the resumed run publishes the checkpoint's
weights to them before its first step). Each attempt is served by the replicas live at the end of the
one before: a replacement the router started for a dead replica serves on (the dead one is not
replaced again), and engine restarts count against rollout.max_engine_restarts over the whole run.
The supervisor stops those replacements once, at the end. Each restart is a line in ``restarts.log`` in the run
directory and on stderr. A death before the first checkpoint, or past the restart budget, ends the
run with TrainerLost as without the supervisor.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import ray

from flywheel.cluster.workers import local_run_spec, run_spec, start_workers
from flywheel.config import Config
from flywheel.controller import TrainerLost, train
from flywheel.engines.base import Engine
from flywheel.weights import open_transport


def supervise(config: Config, engines: list[Engine] | None = None, trainer_class: type | None = None) -> Path:
    """Trains ``config``, restarting the trainer group after a rank dies; returns the run directory.
    ``engines``: serve the run with these (left running); None: start them and stop them at the end.
    ``trainer_class``: the rank class (default Trainer). Every attempt's actors come from one run spec,
    the one a plain run of ``config`` gets (cluster/workers.py): the same core split and placement."""
    own_engines, own_ray = engines is None, not ray.is_initialized()
    spec = local_run_spec(config) if own_engines else run_spec(config)  # given engines: placed by the caller
    config, given, workers, restarts = spec.config, list(engines or []), None, 0
    try:
        while True:
            serving = workers.engines if workers else engines  # replacements included: they serve on
            transport = open_transport(config.weights, config.rollout.engines if serving is None else len(serving))
            workers = start_workers(spec, transport, trainer_class, serving, workers.engine_restarts if workers else 0)
            workers.hand_back, given = True, given or list(workers.engines)
            try:
                return train(config, workers)
            except TrainerLost as lost:
                if lost.checkpoint is None or restarts == config.run.max_restarts:
                    raise
                restarts += 1
                log_restart(lost.run_dir, f"restart {restarts} of {config.run.max_restarts}: {lost}")
                config = config.model_copy(update={"run": config.run.model_copy(update={"resume": str(lost.run_dir)})})
            finally:
                workers.trainer.shutdown()
    finally:
        for engine in workers.engines if workers else ():  # replacements: the supervisor's own
            if not any(engine is e for e in given):
                engine.shutdown()
        if own_engines:
            for engine in given:
                engine.shutdown()
            if own_ray:
                ray.shutdown()


def log_restart(run_dir: Path, line: str) -> None:
    """Appends ``line`` (UTC time first) to run_dir/restarts.log and prints it."""
    stamped = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}"
    with (run_dir / "restarts.log").open("a") as log:
        log.write(stamped + "\n")
    print(f"flywheel: {stamped}", file=sys.stderr)
