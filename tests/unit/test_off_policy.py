import math

import pytest
import torch

from flywheel.algorithms.off_policy import masked_is_keep, truncated_is_weights

# Two sequences; row 0 has three completion tokens, row 1 two (its last position is padding).
# log ratios chosen so the ratios are exact: row 0 -> [2, 0.5, 4], row 1 -> [1, 3, (pad)].
LOG_RATIO = torch.tensor([[math.log(2), math.log(0.5), math.log(4)], [0.0, math.log(3), 5.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def test_token_tis_caps_each_ratio():
    # cap 2.5: [2, 0.5, 4 -> 2.5], [1, 3 -> 2.5, pad -> 0]; 2 of 5 tokens capped
    weights, metrics = truncated_is_weights(LOG_RATIO, MASK, "token", cap=2.5)
    torch.testing.assert_close(weights, torch.tensor([[2.0, 0.5, 2.5], [1.0, 2.5, 0.0]]))
    assert metrics["train/is_ratio_clip_frac"] == pytest.approx(2 / 5)
    # mean of the raw ratios over the 5 tokens: (2 + 0.5 + 4 + 1 + 3) / 5 = 2.1; max 4
    assert metrics["train/is_ratio_mean"] == pytest.approx(2.1)
    assert metrics["train/is_ratio_max"] == pytest.approx(4.0)


def test_sequence_tis_uses_the_product_of_ratios():
    # row 0: 2 * 0.5 * 4 = 4 -> capped at 3; row 1: 1 * 3 = 3 -> kept (padding excluded from the product)
    weights, metrics = truncated_is_weights(LOG_RATIO, MASK, "sequence", cap=3.0)
    torch.testing.assert_close(weights, torch.tensor([[3.0, 3.0, 3.0], [3.0, 3.0, 0.0]]))
    assert metrics["train/is_ratio_clip_frac"] == pytest.approx(3 / 5)  # the 3 tokens of row 0


def test_token_mis_drops_tokens_outside_the_band():
    # band [0.6, 3.5]: drops 0.5 and 4 in row 0; row 1 keeps 1 and 3
    keep, metrics = masked_is_keep(LOG_RATIO, MASK, "token", low=0.6, high=3.5)
    assert keep.tolist() == [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    assert metrics["train/is_ratio_clip_frac"] == pytest.approx(2 / 5)


def test_sequence_mis_drops_whole_sequences():
    # band [0.5, 3.5]: row 0's product 4 is outside -> whole row dropped; row 1's product 3 is kept
    keep, _ = masked_is_keep(LOG_RATIO, MASK, "sequence", low=0.5, high=3.5)
    assert keep.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]


def test_unknown_level_is_refused():
    with pytest.raises(ValueError, match="unknown importance-sampling level"):
        truncated_is_weights(LOG_RATIO, MASK, "episode", cap=2.0)
