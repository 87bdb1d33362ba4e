"""flywheel command line: ``flywheel train CONFIG [section.key=value ...]``."""

from __future__ import annotations

import argparse
import sys

from flywheel.config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flywheel", description="RL post-training for LLMs on Ray and vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="run RL training from a YAML config")
    train.add_argument("config", help="YAML config file, e.g. configs/quickstart.yaml")
    train.add_argument("overrides", nargs="*", help="dotted overrides, e.g. trainer.lr=1e-5")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return 2
    from flywheel.cluster.workers import ClusterUnavailable
    from flywheel.controller import RunStopped
    from flywheel.controller import train as run_training
    from flywheel.rewards.pipeline import HackingStop
    from flywheel.rollout.router import NoEngineLeft
    from flywheel.sandbox import SandboxUnavailable

    try:
        run_training(config)
    except (SandboxUnavailable, ClusterUnavailable) as exc:  # the machine or cluster cannot give what was asked: the user decides
        print(f"flywheel: error: {exc}", file=sys.stderr)
        return 2
    except (HackingStop, RunStopped) as exc:
        print(f"flywheel: stopped: {exc}", file=sys.stderr)
        return 3
    except NoEngineLeft as exc:  # every engine replica died and none may restart
        print(f"flywheel: failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
