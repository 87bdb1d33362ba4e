"""flywheel's vLLM general plugin (entry point group ``vllm.general_plugins``, pyproject.toml): vLLM
calls ``register`` in each of its processes (front end, engine core, workers) before it builds a model,
which makes flywheel's weight-transfer backend known to ``WeightTransferEngineFactory`` wherever vLLM
creates a worker's transfer engine. The engine class itself (engines/vllm_transfer.py) is imported only
when a worker first asks for the backend. ``VLLM_PLUGINS``, when set, must name this plugin."""

from __future__ import annotations

NAME = "flywheel_weight_transfer"  # the entry point's name, what VLLM_PLUGINS would list
BACKEND = "flywheel"  # the backend name engines pass in weight_transfer_config


def register() -> None:
    """Registers the backend once per process (vLLM may load plugins more than once)."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

    try:
        WeightTransferEngineFactory.register_engine(BACKEND, "flywheel.engines.vllm_transfer", "FlywheelTransferEngine")
    except ValueError:  # vLLM's answer to a second registration of the name
        pass
