"""Loading a config: YAML and dotted command-line overrides (``trainer.lr=1e-5``), validated once.

Unknown keys, wrong types and bad values are rejected with one sentence that names the key; the files a
config names are read to check them (the model directory, the checkpoint to resume), and nothing is started.
What needs an implementation to check (an environment's constructor, reward functions, guards, dataset
files) is checked by ``flywheel.preflight``, above every implementation.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic.types import Discriminator

from flywheel.config.algorithms import ALGORITHM_CONFIGS, teacher_directory
from flywheel.config.schema import Config


class ConfigError(ValueError):
    """A user mistake in a config file or override; its message is one sentence naming what to fix."""


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


def _describe(error: dict[str, Any], tree: dict[str, Any]) -> str:
    loc = error["loc"]
    if loc[:1] == ("algorithm",) and error["type"] == "extra_forbidden":
        name = tree["algorithm"].get("name", "grpo")  # validated against the class this name chose
        known = ", ".join(ALGORITHM_CONFIGS[name].model_fields)
        return f"'{'.'.join(map(str, loc))}' is not a setting of algorithm '{name}' (its keys: {known})"
    keys, section = _walk(loc)
    key = ".".join(keys) or "config"
    if error["type"] == "extra_forbidden":
        known = ", ".join(section.model_fields) if section else ""
        return f"unknown key '{key}' (known keys here: {known})"
    if error["type"] == "missing":
        if loc[:1] == ("algorithm",):
            section = ALGORITHM_CONFIGS[tree["algorithm"].get("name", "grpo")]
        field = section.model_fields.get(keys[-1]) if section and keys else None
        return f"'{key}' is required: {field.description if field and field.description else 'set it'}"
    return f"bad value for '{key}': {error['msg'].rstrip('.')} (got {error['input']!r})"


def _walk(loc: tuple) -> tuple[list[str], type[BaseModel] | None]:
    """The keys of an error location as the user wrote them (without the member name pydantic adds
    inside a section keyed on ``name``, such as ``engine``) and the section holding the last key."""
    keys: list[str] = []
    holder, model, members = None, Config, None
    for part in map(str, loc):
        if members is not None:  # the member the section's ``name`` chose: not a key
            model, members = members.get(part), None
            continue
        keys.append(part)
        holder = model
        model, members = _section(model.model_fields.get(part) if model else None)
    return keys, holder


def _section(field: FieldInfo | None) -> tuple[type[BaseModel] | None, dict[str, type[BaseModel]] | None]:
    """The section a field holds, or (None, its members by name) for a union keyed on ``name``."""
    if field is None:
        return None, None
    if any(isinstance(m, Discriminator) for m in field.metadata):
        return None, {m.model_fields["name"].default: m for m in _models(field.annotation)}
    plain = field.annotation
    return (plain if isinstance(plain, type) and issubclass(plain, BaseModel) else None), None


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


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
    return config_from_dict(tree, overrides, path)


def config_from_dict(tree: dict[str, Any], overrides: list[str] = (), path: str | Path | None = None) -> Config:
    """Validates a config tree (as a YAML file holds it) with dotted overrides applied; ``path`` names
    its file in error sentences. The checks of ``load_config``; the tree is not changed."""
    tree = copy.deepcopy(tree)
    for text in overrides:
        _set_dotted(tree, *_parse_override(text))
    try:
        config = Config.model_validate(tree)
    except ValidationError as exc:
        error = exc.errors()[0]
        prefix = f"{path}: " if path is not None else ""
        if error["type"] == "value_error":  # a model validator's own sentence
            raise ConfigError(prefix + str(error["ctx"]["error"])) from None
        raise ConfigError(prefix + _describe(error, tree)) from None
    if config.run.resume is not None and not any(Path(config.run.resume).glob("checkpoints/step_*/trainer_state.pt")):
        raise ConfigError(f"run.resume '{config.run.resume}' holds no checkpoint to resume from (checkpoints/step_N/trainer_state.pt)")
    if config.eval.engines and not config.weights.engines_can_rejoin:
        raise ConfigError(
            f"eval.engines needs a weight transport that engines can join at any time (weights.name=file), not weights.name={config.weights.name}"
        )
    models = [("model.path", config.model.path)]
    if teacher := teacher_directory(config.algorithm):
        models.append(("algorithm.teacher", teacher))
    for key, model in models:
        if problem := model_problem(model, key):
            raise ConfigError(problem)
    return config


def model_problem(path: str, key: str = "model.path") -> str | None:
    """One sentence on what is missing or unreadable in the model directory that config key ``key`` names, or None."""
    from safetensors import safe_open

    root = Path(path)
    if not (root / "config.json").is_file():
        return f"{key} '{path}' is not a Hugging Face model directory (no config.json)"
    if not any((root / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return f"{key} '{path}' has no tokenizer files (tokenizer.json, tokenizer.model or vocab.json); copy them from the model's original directory"
    index = root / "model.safetensors.index.json"
    shards = sorted(set(yaml.safe_load(index.read_text())["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    for shard in shards:
        try:
            with safe_open(str(root / shard), framework="pt") as f:
                f.keys()
        except Exception as error:  # noqa: BLE001 - any unreadable file gets the same sentence
            return f"{key} '{path}': weights file '{shard}' cannot be read ({type(error).__name__}: {error}); use safetensors weights"
    return None


def dump_config(config: Config) -> str:
    """The resolved config as YAML, loadable again by load_config."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
