"""Algorithms by name: each file holds one algorithm's group rules, advantages and loss; its settings are
declared in config/algorithms.py."""

from __future__ import annotations

from flywheel.algorithms.base import Algorithm
from flywheel.algorithms.cispo import CISPO
from flywheel.algorithms.dapo import DAPO
from flywheel.algorithms.dr_grpo import DrGRPO
from flywheel.algorithms.grpo import GRPO
from flywheel.algorithms.gspo import GSPO
from flywheel.algorithms.ppo import PPO
from flywheel.algorithms.reinforce_pp import ReinforcePP, ReinforcePPBaseline
from flywheel.algorithms.rloo import RLOO
from flywheel.config.algorithms import AlgorithmConfig

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.config_type.model_fields["name"].default: cls for cls in (GRPO, DrGRPO, DAPO, RLOO, ReinforcePP, ReinforcePPBaseline, GSPO, CISPO, PPO)
}


def make_algorithm(config: AlgorithmConfig) -> Algorithm:
    return ALGORITHMS[config.name](config)
