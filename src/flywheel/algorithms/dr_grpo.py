"""Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): GRPO without the std division
and with a constant loss divisor, which removes the length and difficulty biases."""

from typing import Literal

from pydantic import Field

from flywheel.algorithms.aggregation import AGGREGATIONS
from flywheel.algorithms.grpo import GRPO, STD_SCALES, GRPOConfig


class DrGRPOConfig(GRPOConfig):
    name: Literal["dr_grpo"] = "dr_grpo"
    std_scale: Literal[STD_SCALES] = Field("none", description="Divide group-centred rewards by the group's std, the batch's, or nothing.")
    aggregation: Literal[AGGREGATIONS] = Field(
        "seq_mean_token_sum_norm", description="How per-token losses become one scalar (normalised over the whole optimiser step)."
    )


class DrGRPO(GRPO):
    config_type = DrGRPOConfig
