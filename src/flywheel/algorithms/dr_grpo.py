"""Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): GRPO without the std division
and with a constant loss divisor, which removes the length and difficulty biases."""

from flywheel.algorithms.base import register_algorithm
from flywheel.algorithms.grpo import GRPO
from flywheel.config.algorithms import DrGRPOConfig


@register_algorithm
class DrGRPO(GRPO):
    config_type = DrGRPOConfig
