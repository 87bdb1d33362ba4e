"""Schema of the ``algorithm:`` section: one member per algorithm, keyed on ``name`` (default grpo).

Each built-in algorithm's settings are declared here, once; its implementation (algorithms/<name>.py) names
its config class in ``config_type``. Fields shared by every algorithm (aggregation, entropy bonus, KL to a
reference, off-policy corrections, the modules to import) live on ``AlgorithmConfig``. An algorithm of the
user's own declares its config class beside its implementation, in a module named in ``algorithm.imports``;
registering it (``flywheel.algorithms.register_algorithm``) adds the class to ``ALGORITHM_CONFIGS``. This
module imports no algorithm: only those modules, when a config names them.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SerializeAsAny

#: How per-token losses become one scalar (algorithms/aggregation.py implements each).
AGGREGATIONS = ("token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm")
#: What group-centred rewards are divided by (algorithms/grpo.py).
STD_SCALES = ("group", "batch", "none")


class AlgorithmConfig(BaseModel):
    """Settings every algorithm has; each algorithm's config adds its own and its ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("grpo", description="The algorithm: a built-in one or one registered by a module of algorithm.imports.")
    imports: list[str] = Field(
        [], description="Python modules imported before the algorithm is chosen: where your own @register_algorithm classes live."
    )
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


class DistillConfig(GRPOConfig):
    name: Literal["distill"] = "distill"
    teacher: str = Field(
        ...,
        description="On-policy distillation's teacher, of the policy's tokenizer: a Hugging Face model directory, served by an engine of "
        "its own, or the base URL of an OpenAI-compatible server that returns prompt logprobs (vLLM's: http://host:port/v1).",
    )
    teacher_model: str = Field("teacher", description="The model name the teacher's server serves it under (a teacher URL only).")
    teacher_api_key_env: str | None = Field(None, description="Environment variable holding the teacher server's API key (a teacher URL only).")
    teacher_coef: float = Field(1.0, gt=0, description="Weight of the teacher's per-token advantage, log p_teacher - log p_student.")
    reward_weight: float = Field(0.0, ge=0, description="Weight of the task reward's group-normalised advantage added to it (0: distillation alone).")
    advantage_clip: float | None = Field(
        None, gt=0, description="The teacher's per-token advantages are clipped to [-advantage_clip, advantage_clip] (null: not clipped)."
    )

    @property
    def teacher_is_url(self) -> bool:
        return self.teacher.startswith(("http://", "https://"))


def teacher_directory(algorithm: AlgorithmConfig) -> str | None:
    """The model directory of the algorithm's distillation teacher, served by an engine of the run's own; None when
    it has no teacher or its teacher is a server's URL."""
    teacher = getattr(algorithm, "teacher", None)
    return None if teacher is None or algorithm.teacher_is_url else teacher


#: Every algorithm's settings by ``algorithm.name``, in the order the docs list them; an algorithm of the
#: user's own is added when its module registers it.
ALGORITHM_CONFIGS: dict[str, type[AlgorithmConfig]] = {
    cls.model_fields["name"].default: cls
    for cls in (
        GRPOConfig, DrGRPOConfig, DAPOConfig, RLOOConfig, ReinforcePPConfig, ReinforcePPBaselineConfig, GSPOConfig, CISPOConfig, PPOConfig, DistillConfig,
    )
}  # fmt: skip


def add_algorithm_config(config_type: type[AlgorithmConfig]) -> str:
    """Makes ``config_type`` selectable by its ``name``; the same class again changes nothing, another class
    under a name already taken is refused."""
    name = config_type.model_fields["name"].default
    if not isinstance(name, str) or not name:
        raise TypeError(f"{config_type.__name__} needs a default name, e.g. name: Literal['my_algorithm'] = 'my_algorithm'")
    known = ALGORITHM_CONFIGS.setdefault(name, config_type)
    if known is not config_type:
        raise ValueError(f"algorithm name {name!r} is taken by {known.__module__}.{known.__qualname__}; give {config_type.__qualname__} another")
    return name


def _chosen(data: Any) -> Any:
    """An ``algorithm:`` mapping as the config class its ``name`` chooses, after importing the modules of
    its ``imports`` (which may register that class)."""
    if not isinstance(data, dict):
        return data  # an AlgorithmConfig already
    modules = data.get("imports") or []
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ValueError(f"algorithm.imports must be a list of module names, e.g. [my_algorithm] (got {modules!r})")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"algorithm.imports: cannot import {module!r} ({error}); put its folder on PYTHONPATH") from None
        except Exception as error:  # the module's own code failed: a syntax error, a name registered twice
            raise ValueError(f"algorithm.imports: importing {module!r} raised {type(error).__name__}: {error}") from None
    name = data.get("name", "grpo")
    if not isinstance(name, str) or name not in ALGORITHM_CONFIGS:
        raise ValueError(
            f"unknown algorithm.name {name!r}: use one of {', '.join(ALGORITHM_CONFIGS)} (or add the module registering yours to algorithm.imports)"
        )
    return ALGORITHM_CONFIGS[name].model_validate(data)


#: The ``algorithm:`` config section: the member of ``ALGORITHM_CONFIGS`` chosen by ``name`` (default grpo),
#: written out with all of its fields.
AnyAlgorithmConfig = Annotated[SerializeAsAny[AlgorithmConfig], BeforeValidator(_chosen)]
