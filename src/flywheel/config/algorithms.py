"""Schema of the ``algorithm:`` section: one member per algorithm, keyed on ``name`` (default grpo).

Each algorithm's settings are declared here, once; its implementation (algorithms/<name>.py) names its
config class in ``config_type``. Fields shared by every algorithm (aggregation, entropy bonus, KL to a
reference, off-policy corrections) live on ``AlgorithmConfig``. This module imports no algorithm.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

#: How per-token losses become one scalar (algorithms/aggregation.py implements each).
AGGREGATIONS = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm")
#: What group-centred rewards are divided by (algorithms/grpo.py).
STD_SCALES = ("group", "batch", "none")


class AlgorithmConfig(BaseModel):
    """Settings every algorithm has; each algorithm's config adds its own and its ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    aggregation: Literal[AGGREGATIONS] = Field(
        "token_mean", description="How per-token losses become one scalar (normalised over the whole optimiser step)."
    )
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus weight (0: off).")
    kl_beta: float = Field(0.0, ge=0, description="KL-to-reference weight; 0 loads no reference model.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="Per-token KL estimator.")
    kl_placement: Literal["loss", "reward"] = Field("loss", description="Add the KL to the loss, or subtract its sequence sum from the reward.")
    off_policy: Literal["none", "tis", "mis"] = Field(
        "none", description="Correct for the engine (behaviour) vs trainer gap: truncated IS weights, masked IS, or none."
    )
    is_level: Literal["token", "sequence"] = Field("token", description="Importance ratios per token, or per sequence (their product).")
    is_cap: float = Field(2.0, gt=0, description="TIS: importance weights above this are truncated to it.")
    is_low: float = Field(0.5, ge=0, description="MIS: tokens (or sequences) whose ratio is below this are left out of the loss.")
    is_high: float = Field(2.0, gt=0, description="MIS: tokens (or sequences) whose ratio is above this are left out of the loss.")


class ClipConfig(AlgorithmConfig):
    """Settings of the PPO-style clipped surrogate."""

    clip_low: float = Field(0.2, gt=0, lt=1, description="Ratios below 1 - clip_low are clipped.")
    clip_high: float = Field(0.2, gt=0, description="Ratios above 1 + clip_high are clipped (clip-higher when > clip_low).")
    dual_clip: float | None = Field(None, gt=1, description="PPO dual-clip constant c: the loss of negative-advantage tokens is capped at -c*A.")


class GRPOConfig(ClipConfig):
    name: Literal["grpo"] = "grpo"
    std_scale: Literal[STD_SCALES] = Field("group", description="Divide group-centred rewards by the group's std, the batch's, or nothing.")


class DrGRPOConfig(GRPOConfig):
    name: Literal["dr_grpo"] = "dr_grpo"
    std_scale: Literal[STD_SCALES] = Field("none", description="Divide group-centred rewards by the group's std, the batch's, or nothing.")
    aggregation: Literal[AGGREGATIONS] = Field(
        "seq_mean_token_sum_norm", description="How per-token losses become one scalar (normalised over the whole optimiser step)."
    )


class DAPOConfig(GRPOConfig):
    name: Literal["dapo"] = "dapo"
    clip_high: float = Field(0.28, gt=0, description="Ratios above 1 + clip_high are clipped (clip-higher).")
    dynamic_sampling: bool = Field(True, description="Drop groups whose rewards are all equal and sample more prompts.")
    max_sampling_rounds: int = Field(4, ge=1, description="Rounds of prompts_per_step groups a step may examine before training on a short batch.")
    overlong_buffer: int = Field(2, ge=0, description="Completions longer than max_new_tokens - buffer lose reward linearly (0: off).")
    overlong_penalty: float = Field(1.0, ge=0, description="Reward lost at max_new_tokens.")
    overlong_filter: bool = Field(True, description="Truncated completions are left out of the loss.")


class RLOOConfig(ClipConfig):
    name: Literal["rloo"] = "rloo"


class ReinforcePPConfig(ClipConfig):
    name: Literal["reinforce_pp"] = "reinforce_pp"
    kl_beta: float = Field(0.001, ge=0, description="KL-to-reference weight; 0 loads no reference model.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k1", description="Per-token KL estimator.")
    kl_placement: Literal["loss", "reward"] = Field("reward", description="Add the KL to the loss, or subtract its sequence sum from the reward.")


class ReinforcePPBaselineConfig(ClipConfig):
    name: Literal["reinforce_pp_baseline"] = "reinforce_pp_baseline"


class GSPOConfig(AlgorithmConfig):
    name: Literal["gspo"] = "gspo"
    std_scale: Literal[STD_SCALES] = Field("group", description="Divide group-centred rewards by the group's std, the batch's, or nothing.")
    clip_low: float = Field(3e-4, gt=0, lt=1, description="Sequence ratios below 1 - clip_low are clipped.")
    clip_high: float = Field(4e-4, gt=0, description="Sequence ratios above 1 + clip_high are clipped.")
    aggregation: Literal[AGGREGATIONS] = Field(
        "seq_mean_token_mean", description="How per-token losses become one scalar (normalised over the whole optimiser step)."
    )


class CISPOConfig(AlgorithmConfig):
    name: Literal["cispo"] = "cispo"
    std_scale: Literal[STD_SCALES] = Field("group", description="Divide group-centred rewards by the group's std, the batch's, or nothing.")
    clip_low: float | None = Field(None, gt=0, lt=1, description="IS weights below 1 - clip_low are clipped (null: no lower bound).")
    clip_high: float = Field(0.28, gt=0, description="IS weights above 1 + clip_high are clipped.")


class PPOConfig(ClipConfig):
    name: Literal["ppo"] = "ppo"
    gamma: float = Field(1.0, ge=0, le=1, description="GAE discount.")
    lam: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    critic_lr: float = Field(1e-3, gt=0, description="Critic AdamW learning rate.")
    value_clip: float = Field(0.2, gt=0, description="New values stay within this of the rollout-time values in the value loss.")


#: Every algorithm's settings by ``algorithm.name``, in the order the docs list them.
ALGORITHM_CONFIGS: dict[str, type[AlgorithmConfig]] = {
    cls.model_fields["name"].default: cls
    for cls in (
        GRPOConfig, DrGRPOConfig, DAPOConfig, RLOOConfig, ReinforcePPConfig, ReinforcePPBaselineConfig, GSPOConfig, CISPOConfig, PPOConfig,
    )
}  # fmt: skip


def _name_of(data: Any) -> str:
    return data.get("name", "grpo") if isinstance(data, dict) else data.name


#: The ``algorithm:`` config section: one member per algorithm, chosen by ``name`` (default grpo).
AnyAlgorithmConfig = Annotated[
    Union[tuple(Annotated[cls, Tag(name)] for name, cls in ALGORITHM_CONFIGS.items())],  # noqa: UP007
    Discriminator(_name_of),
]
