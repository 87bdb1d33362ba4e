"""Estimators with left-out episodes: the statistics count valid rewards only, left-out entries get 0."""

import pytest
import torch

from flywheel.algorithms.grpo import grpo_advantages
from flywheel.algorithms.reinforce_pp import reinforce_pp_advantages, reinforce_pp_baseline_advantages
from flywheel.algorithms.rloo import rloo_advantages

REWARDS = torch.tensor([[1.0, 0.0, 0.0, 9.0], [2.0, 0.0, 1.0, 1.0]])
VALID = torch.tensor([[True, True, True, False], [True, True, True, True]])


def test_grpo_group_std_by_hand():
    # group 0 valid [1, 0, 0]: mean 1/3, sample std sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3) = 0.57735
    a = grpo_advantages(REWARDS, "group", valid=VALID)
    torch.testing.assert_close(
        a[0], torch.tensor([(2 / 3) / (0.57735027 + 1e-6), -(1 / 3) / (0.57735027 + 1e-6), -(1 / 3) / (0.57735027 + 1e-6), 0.0])
    )
    # group 1 is whole: the same as the unmasked estimator
    torch.testing.assert_close(a[1], grpo_advantages(REWARDS[1:], "group")[0])


@pytest.mark.parametrize("std_scale", ["group", "none"])
def test_group_local_estimators_equal_the_estimator_on_the_valid_episodes(std_scale):
    a = grpo_advantages(REWARDS, std_scale, valid=VALID)
    torch.testing.assert_close(a[0, :3], grpo_advantages(REWARDS[:1, :3], std_scale)[0])
    r = rloo_advantages(REWARDS, VALID)
    torch.testing.assert_close(r[0, :3], rloo_advantages(REWARDS[:1, :3])[0])
    assert a[0, 3] == 0 and r[0, 3] == 0


def test_batch_estimators_use_the_valid_rewards_of_the_whole_batch():
    kept = REWARDS[VALID]  # 7 rewards
    torch.testing.assert_close(reinforce_pp_advantages(REWARDS, valid=VALID)[VALID], (kept - kept.mean()) / (kept.std() + 1e-6))
    # batch std: valid rewards [1, 0, 0, 2, 0, 1, 1]; group 0 centred by its valid mean 1/3
    centred = torch.tensor([2 / 3, -1 / 3, -1 / 3, 1.0, -1.0, 0.0, 0.0])
    torch.testing.assert_close(grpo_advantages(REWARDS, "batch", valid=VALID)[VALID], centred / (kept.std() + 1e-6))
    torch.testing.assert_close(reinforce_pp_baseline_advantages(REWARDS, valid=VALID)[VALID], centred / (centred.std() + 1e-6))
    for a in (reinforce_pp_advantages(REWARDS, valid=VALID), reinforce_pp_baseline_advantages(REWARDS, valid=VALID)):
        assert a[0, 3] == 0


def test_all_valid_masks_agree_with_the_plain_estimators():
    everything = torch.ones_like(VALID)
    for scale in ("group", "batch", "none"):
        torch.testing.assert_close(grpo_advantages(REWARDS, scale, valid=everything), grpo_advantages(REWARDS, scale))
    torch.testing.assert_close(rloo_advantages(REWARDS, everything), rloo_advantages(REWARDS))
    torch.testing.assert_close(reinforce_pp_advantages(REWARDS, valid=everything), reinforce_pp_advantages(REWARDS))
    torch.testing.assert_close(reinforce_pp_baseline_advantages(REWARDS, valid=everything), reinforce_pp_baseline_advantages(REWARDS))
