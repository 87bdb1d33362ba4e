import pytest
import torch

from flywheel.algorithms.aggregation import AGGREGATIONS, aggregate, token_mean

# A short sequence (1 token, value 6) and a long one (3 tokens, values 1, 2, 3); the short row's padding
# holds 9s that must never count. B = 2, 4 tokens in all.
VALUES = torch.tensor([[6.0, 9.0, 9.0], [1.0, 2.0, 3.0]])
MASK = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])


@pytest.mark.parametrize(
    ("mode", "expected", "short_weight", "long_weight"),
    [
        # every token 1 / 4: (6 + 1 + 2 + 3) / 4 = 3.0
        ("token_mean", 3.0, 1 / 4, 1 / 4),
        # every token 1 / B = 1 / 2: (6 + (1 + 2 + 3)) / 2 = 6.0
        ("seq_mean_token_sum", 6.0, 1 / 2, 1 / 2),
        # each sequence 1 / 2, split over its tokens: short 1 / 2, long 1 / (2 * 3) = 1 / 6: (6 / 1 + 6 / 3) / 2 = 4.0
        ("seq_mean_token_mean", 4.0, 1 / 2, 1 / 6),
        # constant divisor B * norm_tokens = 2 * 4 = 8, every token 1 / 8: 12 / 8 = 1.5
        ("seq_mean_token_sum_norm", 1.5, 1 / 8, 1 / 8),
    ],
)
def test_each_mode_weighs_short_and_long_sequences(mode, expected, short_weight, long_weight):
    values = VALUES.clone().requires_grad_(True)
    out = aggregate(values, MASK, mode, norm_tokens=4)
    assert abs(out.item() - expected) < 1e-6
    # d out / d value_bt is the weight of token (b, t); padding weighs 0
    out.backward()
    expected_grad = torch.tensor([[short_weight, 0.0, 0.0], [long_weight, long_weight, long_weight]])
    torch.testing.assert_close(values.grad, expected_grad, atol=1e-7, rtol=0)


def test_all_modes_are_listed():
    assert set(AGGREGATIONS) == {"token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm"}


def test_token_mean_is_the_token_mean_mode():
    # (6 + 1 + 2 + 3) / 4 = 3.0, as aggregate(..., "token_mean")
    assert token_mean(VALUES, MASK).item() == 3.0


def test_empty_mask_gives_zero_not_nan():
    # denominators are clamped to at least 1: 0 / 1 = 0
    empty = torch.zeros(2, 3)
    for mode in ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean"):
        assert aggregate(VALUES, empty, mode).item() == 0.0


def test_sum_norm_needs_norm_tokens():
    with pytest.raises(ValueError, match="norm_tokens"):
        aggregate(VALUES, MASK, "seq_mean_token_sum_norm")


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(VALUES, MASK, "sequence_sum")
