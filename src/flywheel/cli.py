"""flywheel command line: ``flywheel train CONFIG [section.key=value ...]``,
``flywheel eval CONFIG --checkpoint PATH --k K [section.key=value ...]``, ``flywheel inspect RUN_DIR``,
``flywheel replay RUN_DIR --step N``, ``flywheel dashboard RUNS_DIR [--port P] [--host H]``,
``flywheel check-reward CONFIG [--tasks N] [section.key=value ...]`` (exit 1 when an adversarial form earns reward).

Exit codes: 0 the run finished; 1 every engine replica died and none may restart; 2 a config error or a
machine that cannot give what the config asks (one sentence, nothing started), or a user function that returns
the wrong shape or type (a reward function, a grader), at its first call; 3 an alert stopped the run (its config
asked for that); 4 a trainer rank died (with run.supervise: past run.max_restarts, or before the first
checkpoint); the message names the checkpoint to resume from; 5 the run could make no progress
(rollout.stall_steps steps' worth of groups in a row trained none, or no group finished in
rollout.stall_timeout_s): the sentence gives the share of invalid episodes and the first error; 6 SIGTERM,
SIGINT or SIGUSR1 stopped the run: stopped, resumable, with one line naming the checkpoint of the last step done (a
second signal stops at once, without a new checkpoint; flywheel/preemption.py). Started by ``mpirun -np N``, every process
runs this command: rank 0 the run, the others its trainer ranks (``cluster/mpi.py``); a nonzero code aborts the job,
unless rank 0 had released the other ranks (a stop signal: mpirun's exit code is then 6).
"""

from __future__ import annotations

import argparse
import sys

from flywheel.config import Config, ConfigError

EXIT_FAILED, EXIT_CONFIG, EXIT_STOPPED, EXIT_TRAINER_LOST, EXIT_NO_PROGRESS, EXIT_PREEMPTED = 1, 2, 3, 4, 5, 6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flywheel", description="RL post-training for LLMs on Ray and vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="run RL training from a YAML config")
    train.add_argument("config", help="YAML config file, e.g. configs/quickstart.yaml")
    train.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=1e-5")
    evaluate = commands.add_parser("eval", help="pass@k, maj@k and mean@k of a checkpoint on the environment's held-out split")
    evaluate.add_argument("config", help="YAML config file of the run (task, engine, eval.temperature, rollout.max_new_tokens)")
    evaluate.add_argument("overrides", nargs="*", help="dotted overrides, e.g. task.eval_size=100")
    evaluate.add_argument("--checkpoint", help="model directory, or run directory (its final/ model); default: the config's model.path")
    evaluate.add_argument("--k", type=int, default=1, help="k of pass@k, maj@k and mean@k (default 1)")
    evaluate.add_argument("--n", type=int, help="samples per task, n >= k, all used by pass@k (default k)")
    evaluate.add_argument("--engines", type=int, help="engine replicas (default rollout.engines)")
    evaluate.add_argument("--output", help="report path (default eval_k<K>.json in the checkpoint directory)")
    check = commands.add_parser("check-reward", help="what the configured reward pays honest answers and adversarial completions of real tasks")
    check.add_argument("config", help="YAML config file of the run (task, reward)")
    check.add_argument("overrides", nargs="*", help="dotted overrides, e.g. reward.guards=[]")
    check.add_argument("--tasks", type=int, default=16, help="tasks to build probes from (default 16)")
    inspect = commands.add_parser("inspect", help="a run on one screen: config changes, last metrics, alerts, slowest stages")
    inspect.add_argument("run_dir", help="run directory, e.g. runs/quickstart")
    replay = commands.add_parser("replay", help="recompute a step's loss and gradient norm from its rollout dump and checkpoint")
    replay.add_argument("run_dir", help="run directory with rollouts/ dumps and checkpoints/")
    replay.add_argument("--step", type=int, required=True, help="the step to replay")
    board = commands.add_parser("dashboard", help="serve a web page of the runs under RUNS_DIR (curves, trajectories, timeline, alerts)")
    board.add_argument("runs_dir", help="a run directory or the directory holding them, e.g. runs")
    board.add_argument("--port", type=int, default=8600, help="port to serve on (0: a free one); default 8600")
    board.add_argument("--host", default="127.0.0.1", help="address to bind; default 127.0.0.1 (this machine only)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "dashboard":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return run_dashboard(args.runs_dir, args.host, args.port)
    if args.command == "replay":
        return run_replay(args.run_dir, args.step)
    if args.command == "inspect":
        return run_inspect(args.run_dir)  # overrides may follow the options
    strays = [a for a in rest if a.startswith("-") or "=" not in a]
    if strays:
        parser.error(f"unrecognized arguments: {' '.join(strays)}")
    args.overrides += rest
    try:
        from flywheel.preflight import load_run_config

        config = load_run_config(args.config, args.overrides)
        if args.command == "eval":
            return run_eval(config, args)
        if args.command == "check-reward":
            return run_check_reward(config, args.tasks)
    except ConfigError as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    from flywheel.cluster.mpi import launched_by_mpi, run_rank

    return run_rank(config, run) if launched_by_mpi() else run(config)


def run_inspect(run_dir: str) -> int:
    from pathlib import Path

    from flywheel.monitor.run_summary import summary

    try:
        print(summary(Path(run_dir)))
    except FileNotFoundError as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def run_replay(run_dir: str, step: int) -> int:
    """Exit 0 when the replayed loss and gradient norm equal the logged ones, 1 when they differ."""
    from pathlib import Path

    from flywheel.monitor.replay import replay

    try:
        result = replay(Path(run_dir), step)
    except ConfigError as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(result.report())
    return 0 if result.exact else EXIT_FAILED


def run_eval(config: Config, args: argparse.Namespace) -> int:
    """``flywheel eval``: prints each metric with its interval and the report's path."""
    from flywheel.eval.harness import EvalRequest, evaluate_checkpoint

    report = evaluate_checkpoint(config, args.checkpoint, EvalRequest(k=args.k, n=args.n, engines=args.engines, output=args.output))
    print(
        f"{report['model']}: {report['tasks']} tasks of {report['environment']}, n={report['n']} samples each at temperature {report['temperature']}"
    )
    for name, m in report["metrics"].items():
        print(f"  {name:>10} {m['value']:.4f}  (95% CI {m['ci_low']:.4f} - {m['ci_high']:.4f})")
    print(f"report: {report['path']}")
    return 0


def run_check_reward(config: Config, tasks: int) -> int:
    """``flywheel check-reward``: prints the report; 1 when an adversarial form earns reward."""
    from flywheel.reward_check import check_reward
    from flywheel.rewards.faults import UserFunctionBug
    from flywheel.sandbox import SandboxUnavailable

    try:
        result = check_reward(config, tasks)
    except (UserFunctionBug, SandboxUnavailable) as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(result.report())
    return EXIT_FAILED if result.paying else 0


def run_dashboard(runs_dir: str, host: str, port: int) -> int:
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
    from flywheel.monitor.run_dir import run_dir_problem
    from flywheel.preemption import Preempted
    from flywheel.reward_check import check_at_start
    from flywheel.rewards.faults import UserFunctionBug
    from flywheel.rewards.pipeline import HackingStop
    from flywheel.rollout.router import NoEngineLeft
    from flywheel.rollout.stream import NoProgress
    from flywheel.sandbox import SandboxUnavailable
    from flywheel.supervisor import supervise
    from flywheel.weights.base import WeightsCorrupt

    if problem := run_dir_problem(config):  # before anything starts
        print(f"flywheel: error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        check_at_start(config)
        supervise(config) if config.run.supervise else train(config)
    except (ConfigError, SandboxUnavailable, ClusterUnavailable, UserFunctionBug) as exc:  # what was asked cannot work: the user decides
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except NoProgress as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_NO_PROGRESS
    except (HackingStop, RunStopped) as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    except TrainerLost as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_TRAINER_LOST
    except (NoEngineLeft, WeightsCorrupt) as exc:  # every engine replica died and none may restart; weights arrived corrupt twice
        print(f"flywheel: failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Preempted as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return EXIT_PREEMPTED
    except KeyboardInterrupt:  # a second signal while starting or closing
        print("flywheel: stopped at once by a second signal; no checkpoint was written", file=sys.stderr)
        return EXIT_PREEMPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
