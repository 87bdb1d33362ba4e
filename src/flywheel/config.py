"""Typed configuration: one home per default, validated once at load.

A config is a YAML file whose keys mirror the sections below, plus dotted command-line overrides
(``trainer.lr=1e-5``). Unknown keys, wrong types and bad values are rejected with one sentence that
names the key; the resolved config is written into the run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """A user mistake in a config file or override; its message is one sentence naming what to fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(Section):
    path: str = Field("assets/tiny-adder", description="Hugging Face model directory of the initial policy.")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="Weights and compute dtype, trainer and engine alike.")


class TaskConfig(Section):
    name: Literal["addition"] = Field("addition", description="Task: 'addition' is n-digit a+b with an exact-answer verifier.")
    digits: int = Field(3, ge=1, le=9, description="Largest number of digits of each operand.")
    train_size: int = Field(5000, ge=1, description="Problems in the train split.")
    eval_size: int = Field(200, ge=1, description="Problems in the held-out eval split.")
    seed: int = Field(0, description="Seed of the splits.")


class RolloutConfig(Section):
    prompts_per_step: int = Field(32, ge=1, description="Distinct prompts sampled per training step.")
    group_size: int = Field(8, ge=2, description="Completions sampled per prompt (the GRPO group).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of training rollouts.")
    max_new_tokens: int = Field(8, ge=1, description="Completion length limit in tokens.")
    kv_cache_gib: int = Field(1, ge=1, description="vLLM KV-cache memory in GiB on CPU (VLLM_CPU_KVCACHE_SPACE, whole GiB).")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="Fraction of GPU memory vLLM may use (GPU only).")


class AlgorithmConfig(Section):
    advantage: Literal["grpo"] = Field("grpo", description="Advantage estimator.")
    scale_by_std: bool = Field(True, description="GRPO: divide group-centred rewards by the group's standard deviation.")
    loss: Literal["ppo_clip"] = Field("ppo_clip", description="Policy loss.")
    clip_eps: float = Field(0.2, gt=0, lt=1, description="PPO clip range: ratios outside [1-eps, 1+eps] stop contributing gradient.")


class TrainerConfig(Section):
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate.")
    betas: tuple[float, float] = Field((0.9, 0.99), description="AdamW betas.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradients are clipped to this global L2 norm.")
    minibatches: int = Field(1, ge=1, description="Optimiser steps per training step (the batch is split evenly).")
    threads: int = Field(2, ge=1, description="Torch CPU threads of the trainer.")


class EvalConfig(Section):
    every: int = Field(5, ge=1, description="Evaluate on the held-out split every N steps (and at step 0).")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of eval/accuracy (one sample per problem).")
    greedy: bool = Field(True, description="Also report eval/greedy_accuracy (temperature 0).")


class RunConfig(Section):
    name: str = Field("quickstart", min_length=1, description="Run directory name under output_dir (suffixed -1, -2... if taken).")
    output_dir: str = Field("runs", description="Parent directory of run directories.")
    steps: int = Field(40, ge=0, description="Training steps (rollout, train, weight sync).")
    checkpoint_every: int = Field(10, ge=1, description="Save an HF-format checkpoint every N steps.")
    seed: int = Field(0, description="Seed of prompt order, sampling and training.")
    progress: bool = Field(True, description="Show a live progress bar on the terminal.")


class Config(Section):
    model: ModelConfig = ModelConfig()
    task: TaskConfig = TaskConfig()
    rollout: RolloutConfig = RolloutConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    trainer: TrainerConfig = TrainerConfig()
    eval: EvalConfig = EvalConfig()
    run: RunConfig = RunConfig()

    @model_validator(mode="after")
    def _consistent(self) -> "Config":
        episodes = self.rollout.prompts_per_step * self.rollout.group_size
        if episodes % self.trainer.minibatches:
            raise ValueError(
                f"trainer.minibatches ({self.trainer.minibatches}) must divide the episodes per step "
                f"(rollout.prompts_per_step * rollout.group_size = {episodes})"
            )
        return self


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for i, key in enumerate(parents):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override '{dotted}': '{'.'.join(parents[: i + 1])}' is a value, not a section")
        node = child
    node[leaf] = value


def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override '{text}' is not of the form section.key=value")
    try:
        return key, yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        return key, raw


def _describe(error: dict[str, Any]) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "config"
    if error["type"] == "extra_forbidden":
        section = _section_of(error["loc"][:-1])
        known = ", ".join(section.model_fields) if section else ""
        return f"unknown key '{key}' (known keys here: {known})"
    return f"bad value for '{key}': {error['msg'].rstrip('.')} (got {error['input']!r})"


def _section_of(loc: tuple) -> type[BaseModel] | None:
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return None
        model = field.annotation
    return model


def load_config(path: str | Path | None, overrides: list[str] = ()) -> Config:
    """Loads YAML (or only defaults when path is None), applies dotted overrides, validates."""
    tree: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file '{path}' does not exist")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise ConfigError(f"config file '{path}' is not valid YAML{where}; fix its syntax") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping of sections, not a {type(loaded).__name__}")
        tree = loaded or {}
    for text in overrides:
        _set_dotted(tree, *_parse_override(text))
    try:
        config = Config.model_validate(tree)
    except ValidationError as exc:
        error = exc.errors()[0]
        prefix = f"{path}: " if path is not None else ""
        if error["type"] == "value_error" and not error["loc"]:
            raise ConfigError(prefix + str(error["ctx"]["error"])) from None
        raise ConfigError(prefix + _describe(error)) from None
    model_json = Path(config.model.path) / "config.json"
    if not model_json.is_file():
        raise ConfigError(f"model.path '{config.model.path}' is not a Hugging Face model directory (no config.json)")
    if yaml.safe_load(model_json.read_text()).get("tie_word_embeddings", False):
        raise ConfigError(
            f"model.path '{config.model.path}' ties its input and output embeddings, which vLLM 0.32's in-place "
            "weight reload leaves stale; use a checkpoint saved with tie_word_embeddings=false"
        )
    return config


def dump_config(config: Config) -> str:
    """The resolved config as YAML, loadable again by load_config."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
