import math

import pytest
import torch

from flywheel.algorithms.kl import KL_ESTIMATORS, kl_penalty

LN2 = math.log(2.0)  # 0.6931472


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        ("k1", LN2),  # x = ln 2 = 0.6931472
        ("k2", 0.5 * LN2**2),  # 0.5 * 0.4804530 = 0.2402265
        ("k3", 0.5 - 1.0 + LN2),  # exp(-ln 2) - 1 + ln 2 = 1/2 - 1 + 0.6931472 = 0.1931472
    ],
)
def test_kl_estimators_at_log_ratio_ln2(estimator, expected):
    # logprobs - ref_logprobs = ln 2 (pi gives the token twice the reference's probability)
    logprobs = torch.tensor([[math.log(0.5)]])
    ref = torch.tensor([[math.log(0.25)]])
    assert abs(kl_penalty(logprobs, ref, estimator).item() - expected) < 1e-6


def test_k3_is_never_negative_where_k1_is():
    # x = -ln 2: k1 = -0.6931472; k3 = exp(ln 2) - 1 - ln 2 = 2 - 1 - 0.6931472 = 0.3068528
    logprobs, ref = torch.tensor([[math.log(0.25)]]), torch.tensor([[math.log(0.5)]])
    assert abs(kl_penalty(logprobs, ref, "k1").item() + LN2) < 1e-6
    assert abs(kl_penalty(logprobs, ref, "k3").item() - (1.0 - LN2)) < 1e-6


def test_kl_estimators_listed_and_unknown_rejected():
    assert KL_ESTIMATORS == ("k1", "k2", "k3")
    with pytest.raises(ValueError, match="unknown KL estimator"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "k4")
