"""Algorithms by name: each file holds one algorithm's config, group rules, advantages and loss."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from flywheel.algorithms.base import Algorithm, AlgorithmConfig
from flywheel.algorithms.cispo import CISPO
from flywheel.algorithms.dapo import DAPO
from flywheel.algorithms.dr_grpo import DrGRPO
from flywheel.algorithms.grpo import GRPO
from flywheel.algorithms.gspo import GSPO
from flywheel.algorithms.ppo import PPO
from flywheel.algorithms.reinforce_pp import ReinforcePP, ReinforcePPBaseline
from flywheel.algorithms.rloo import RLOO

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.config_type.model_fields["name"].default: cls for cls in (GRPO, DrGRPO, DAPO, RLOO, ReinforcePP, ReinforcePPBaseline, GSPO, CISPO, PPO)
}


def _name_of(data: Any) -> str:
    return data.get("name", "grpo") if isinstance(data, dict) else data.name


#: The ``algorithm:`` config section: one member per algorithm, chosen by ``name`` (default grpo).
AnyAlgorithmConfig = Annotated[
    Union[tuple(Annotated[cls.config_type, Tag(name)] for name, cls in ALGORITHMS.items())],  # noqa: UP007
    Discriminator(_name_of),
]


def make_algorithm(config: AlgorithmConfig) -> Algorithm:
    return ALGORITHMS[config.name](config)
