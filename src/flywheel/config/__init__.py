"""Typed configuration, schemas only: one home per default, validated once at load.

A config is a YAML file whose keys mirror the sections of ``Config`` (schema.py), with the algorithm
(algorithms.py), engine (engine.py) and weight transport (weights.py) sections each keyed on ``name``;
``load_config`` (loading.py) reads one with dotted overrides. This package imports no implementation
and no torch: every other folder may import it.
"""

from flywheel.config.algorithms import AlgorithmConfig, AnyAlgorithmConfig
from flywheel.config.engine import EngineConfig, VLLMConfig
from flywheel.config.loading import ConfigError, config_from_dict, dump_config, load_config, model_problem
from flywheel.config.schema import (
    DATASET_KEYS,
    AlertsConfig,
    ClusterConfig,
    Config,
    EvalConfig,
    JudgeConfig,
    LoraConfig,
    ModelConfig,
    MonitorConfig,
    RewardConfig,
    RewardFunctionConfig,
    RewardModelConfig,
    RolloutConfig,
    RunConfig,
    TaskConfig,
    TrainerConfig,
)
from flywheel.config.weights import CollectiveTransportConfig, FileTransportConfig, TransportConfig

__all__ = [
    "DATASET_KEYS",
    "AlertsConfig",
    "AlgorithmConfig",
    "AnyAlgorithmConfig",
    "ClusterConfig",
    "CollectiveTransportConfig",
    "Config",
    "ConfigError",
    "EngineConfig",
    "EvalConfig",
    "FileTransportConfig",
    "JudgeConfig",
    "LoraConfig",
    "ModelConfig",
    "MonitorConfig",
    "RewardConfig",
    "RewardFunctionConfig",
    "RewardModelConfig",
    "RolloutConfig",
    "RunConfig",
    "TaskConfig",
    "TrainerConfig",
    "TransportConfig",
    "VLLMConfig",
    "config_from_dict",
    "dump_config",
    "load_config",
    "model_problem",
]
