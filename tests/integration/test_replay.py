"""flywheel replay: a step trained again from its Parquet dump and the checkpoint before it gives the
logged loss and gradient norm exactly (fp32, CPU); a step without what it needs is refused in one sentence."""

from pathlib import Path

import pytest
from helpers import SYNC

from flywheel.cli import main
from flywheel.config import ConfigError, load_config
from flywheel.controller import train
from flywheel.monitor.replay import replay, replay_inputs

REPO = Path(__file__).resolve().parents[2]


def run(fresh_workers, tmp_path, *extra: str) -> Path:
    config = load_config(
        REPO / "configs/quickstart.yaml",
        [
            *SYNC,
            "run.steps=3",
            "rollout.prompts_per_step=16",
            "rollout.max_staleness=1",  # async: the trained tokens come from two versions; replay does not care
            "monitor.dump_every=1",
            "run.checkpoint_every=2",
            "eval.every=100",
            "eval.greedy=false",
            "task.eval_size=8",
            "run.progress=false",
            f"run.output_dir={tmp_path}",
            *extra,
        ],
    )
    return train(config, fresh_workers(config))


def test_replayed_steps_equal_the_logged_ones(fresh_workers, tmp_path, capsys):
    run_dir = run(fresh_workers, tmp_path)
    first = replay(run_dir, 1)  # from the initial model
    assert first.exact, first.report()
    assert first.logged["loss/policy"] != 0.0 and first.logged["train/grad_norm"] > 0.0
    assert main(["replay", str(run_dir), "--step", "3"]) == 0  # from checkpoints/step_2
    assert "step 3: exact" in capsys.readouterr().out
    with pytest.raises(ConfigError, match=r"replaying step 2 needs the checkpoint of step 1"):
        replay_inputs(run_dir, 2)
    with pytest.raises(ConfigError, match=r"step 4 .* has no rollout dump"):
        replay_inputs(run_dir, 4)


def test_a_ppo_step_replays_with_its_critic(fresh_workers, tmp_path):
    run_dir = run(fresh_workers, tmp_path, "algorithm.name=ppo")
    result = replay(run_dir, 3)
    assert set(result.logged) == {"loss/policy", "train/grad_norm", "loss/critic", "train/critic_grad_norm"}
    assert result.exact, result.report()
