"""flywheel command line: ``flywheel train CONFIG [section.key=value ...]``, ``flywheel dashboard RUNS_DIR [--port P] [--host H]``.

Exit codes: 0 the run finished; 2 a config error or a machine that cannot give what the config asks
(one sentence, nothing started); 3 an alert stopped the run (its config asked for that); 4 a trainer
rank died (with run.supervise: past run.max_restarts, or before the first checkpoint); the message
names the checkpoint to resume from; 1 every engine replica died and none may restart. Started by ``mpirun -np N``, every process runs this command:
rank 0 the run, the others its trainer ranks (``cluster/mpi.py``); a nonzero code aborts the job.
"""

from __future__ import annotations

import argparse
import sys

from flywheel.config import Config, ConfigError, load_config

EXIT_FAILED, EXIT_CONFIG, EXIT_STOPPED, EXIT_TRAINER_LOST = 1, 2, 3, 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flywheel", description="RL post-training for LLMs on Ray and vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="run RL training from a YAML config")
    train.add_argument("config", help="YAML config file, e.g. configs/quickstart.yaml")
    train.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=1e-5")
    board = commands.add_parser("dashboard", help="serve a web page of the runs under RUNS_DIR (curves, trajectories, timeline, alerts)")
    board.add_argument("runs_dir", help="a run directory or the directory holding them, e.g. runs")
    board.add_argument("--port", type=int, default=8600, help="port to serve on (0: a free one); default 8600")
    board.add_argument("--host", default="127.0.0.1", help="address to bind; default 127.0.0.1 (this machine only)")
    args = parser.parse_args(argv)
    if args.command == "dashboard":
        return dashboard(args.runs_dir, args.host, args.port)
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    from flywheel.cluster.mpi import launched_by_mpi, run_rank

    return run_rank(config, run) if launched_by_mpi() else run(config)


def dashboard(runs_dir: str, host: str, port: int) -> int:
    """Serves the dashboard until interrupted; 2 when RUNS_DIR is not a directory or the port cannot be bound."""
    from pathlib import Path

    from flywheel.dashboard.server import serve

    try:
        serve(Path(runs_dir), host, port)
    except OSError as exc:  # not a directory, port taken
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def run(config: Config) -> int:
    """Runs the training ``config`` asks for; its exit code, a stop or error told in one sentence."""
    from flywheel.cluster.workers import ClusterUnavailable
    from flywheel.controller import RunStopped, TrainerLost, train
    from flywheel.rewards.pipeline import HackingStop
    from flywheel.rollout.router import NoEngineLeft
    from flywheel.sandbox import SandboxUnavailable
    from flywheel.supervisor import supervise

    try:
        supervise(config) if config.run.supervise else train(config)
    except (SandboxUnavailable, ClusterUnavailable) as exc:  # the machine or cluster cannot give what was asked: the user decides
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (HackingStop, RunStopped) as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except TrainerLost as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_TRAINER_LOST
    except NoEngineLeft as exc:  # every engine replica died and none may restart
        print(f"flywheel: failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
