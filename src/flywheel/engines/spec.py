"""What one engine replica is built from: ``EngineSpec``, made from the run's config by the actor builder
(cluster/workers.py) and read by the engine implementation (engines/vllm.py), which sees nothing else of
the config."""

from __future__ import annotations

from dataclasses import dataclass

from flywheel.config.engine import EngineConfig
from flywheel.config.weights import TransportConfig


@dataclass(frozen=True)
class EngineSpec:
    """One replica: the model it serves, its engine's options and how it receives weights.

    ``options.cpu_bind`` is resolved already (the run's core split, cluster/cores.py, applied). ``weights``:
    the run's transport, whose engine side the replica sets up where it runs (it alone knows whether it
    sees a GPU). ``replica``: its index among its group's replicas (its ranks in a weight-transfer group)."""

    model: str  # Hugging Face model directory
    dtype: str  # 'float32' or 'bfloat16'
    seed: int  # vLLM's seed (each request also carries its own)
    options: EngineConfig
    weights: TransportConfig
    replica: int = 0
