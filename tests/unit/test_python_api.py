"""The Python API's config forms: a Config, a dict shaped like the YAML, a path; overrides as a dict or strings."""

import pytest
import yaml

from flywheel import Config, ConfigError
from flywheel.api import RunResult, as_config

QUICKSTART = "configs/quickstart.yaml"


def test_every_config_form_gives_the_same_config():
    from_path = as_config(QUICKSTART, {"run.steps": 3, "trainer.lr": 1e-4})
    tree = yaml.safe_load(open(QUICKSTART).read())
    from_dict = as_config(tree, ["run.steps=3", "trainer.lr=1e-4"])
    from_config = as_config(as_config(QUICKSTART), {"run.steps": 3, "trainer.lr": 1e-4})
    assert from_path == from_dict == from_config
    assert from_path.run.steps == 3 and from_path.trainer.lr == 1e-4
    assert tree["run"].get("steps") != 3  # the caller's dict is not changed
    assert as_config() == Config()  # nothing: the defaults


def test_a_dict_gets_the_command_lines_sentences():
    with pytest.raises(ConfigError, match="unknown key 'trainer.lrr'"):
        as_config({"trainer": {"lrr": 1.0}})
    with pytest.raises(ConfigError, match="bad value for 'rollout.group_size'"):
        as_config(QUICKSTART, {"rollout.group_size": 1})
    with pytest.raises(ConfigError, match="model.path 'nowhere' is not a Hugging Face model directory"):
        as_config({"model": {"path": "nowhere"}})


def test_run_result_reads_the_last_value(tmp_path):
    result = RunResult(tmp_path, [{"step": 0, "eval/accuracy": 0.2}, {"step": 1, "reward/mean": 0.5}, {"step": 2, "reward/mean": 0.7}])
    assert result.last("reward/mean") == 0.7 and result.last("eval/accuracy") == 0.2
    with pytest.raises(KeyError, match="never logged"):
        result.last("loss/policy")
