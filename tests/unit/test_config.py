import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import ConfigError, dump_config, load_config
from flywheel.preflight import load_run_config

REPO = Path(__file__).resolve().parents[2]


def test_quickstart_loads_and_round_trips(tmp_path):
    config = load_config(REPO / "configs/quickstart.yaml", ["trainer.lr=1e-5", "run.name=x"])
    assert config.trainer.lr == 1e-5 and config.run.name == "x"
    saved = tmp_path / "config.yaml"
    saved.write_text(dump_config(config))
    assert load_config(saved) == config


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["trainer.lrr=1"], "unknown key 'trainer.lrr'"),
        (["trainer.lr=fast"], "bad value for 'trainer.lr'"),
        (["rollout.group_size=1"], "bad value for 'rollout.group_size'"),
        (["rollout.temperature=3"], "bad value for 'rollout.temperature': Input should be less than or equal to 2"),
        (["algorithm.name=ppo2"], "unknown algorithm.name 'ppo2': use one of grpo, dr_grpo, dapo"),
        (["algorithm.clip_low=null"], "bad value for 'algorithm.clip_low'"),
        (["algorithm.dynamic_sampling=true"], "'algorithm.dynamic_sampling' is not a setting of algorithm 'grpo' (its keys:"),
        (["algorithm.name=ppo", "algorithm.std_scale=none"], "'algorithm.std_scale' is not a setting of algorithm 'ppo'"),
        (["algorithm.name=dapo", "algorithm.overlong_buffer=9"], "algorithm.overlong_buffer (9) must not exceed rollout.max_new_tokens (8)"),
        (["task.name=nope"], "unknown task.name 'nope': use one of the environments"),
        (["task.env_args={digitz: 3}"], "task.env_args do not fit environment 'arithmetic'"),
        (["reward.guards=[exit_trick]"], "reward.guards: unknown guard 'exit_trick'; known guards: exit_tricks"),
        (["reward.guards=[length_padding,length_padding]"], "reward.guards names a guard twice"),
        (["run.resume=nowhere"], "run.resume 'nowhere' holds no checkpoint to resume from"),
        (["trainer.lora.rank=-1"], "bad value for 'trainer.lora.rank'"),
        (["trainer.lora.alpha=8"], "trainer.lora.alpha does nothing while trainer.lora.rank is 0 (off)"),
        (["run.max_restarts=5"], "run.max_restarts does nothing while run.supervise is false; set run.supervise=true"),
        (["run.supervise=true", "run.max_restarts=-1"], "bad value for 'run.max_restarts'"),
        (["trainer.lora.rank=8", "trainer.lora.target_modules=[]"], "bad value for 'trainer.lora.target_modules'"),
        (["rollout.max_engine_restarts=-1"], "bad value for 'rollout.max_engine_restarts'"),
        (["cluster.address=head-node"], "cluster.address must be null (a local Ray), 'auto' or the head node's host:port (got 'head-node')"),
        (["cluster.placement=disaggregated"], "cluster.placement 'disaggregated' needs several nodes: set cluster.address"),
        (["cluster.engine_labels={gpu: h100}"], "cluster.engine_labels needs cluster.address"),
        (["cluster.placement=spread"], "bad value for 'cluster.placement'"),
        (["lr"], "override 'lr' is not of the form section.key=value"),
        (["model.path=nowhere"], "model.path 'nowhere' is not a Hugging Face model directory"),
    ],
)
def test_bad_values_name_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_run_config(REPO / "configs/quickstart.yaml", overrides)
    assert expected in str(info.value)


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flywheel.cli", "train", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "setup, args, expected",
    [
        (None, ["missing.yaml"], "config file 'missing.yaml' does not exist"),
        ("trainer: {lr: [1, 2\n", ["bad.yaml"], "config file 'bad.yaml' is not valid YAML at line 2"),
        ("trainer:\n  learning_rate: 0.1\n", ["bad.yaml"], "unknown key 'trainer.learning_rate'"),
        ("trainer:\n  lr: -1\n", ["bad.yaml"], "bad value for 'trainer.lr': Input should be greater than 0"),
        ("- a\n- b\n", ["bad.yaml"], "must hold a mapping of sections"),
        ("{}\n", ["bad.yaml", "eval.every=never"], "bad value for 'eval.every'"),
    ],
)
def test_cli_bad_input_is_one_sentence_and_exit_2(tmp_path, setup, args, expected):
    if setup is not None:
        (tmp_path / "bad.yaml").write_text(setup)
    (tmp_path / "assets").symlink_to(REPO / "assets")
    result = _cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_cluster_is_one_sentence_before_ray_starts(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "assets").symlink_to(REPO / "assets")
    # through the CLI, in a process of its own: this one may hold a Ray session already (the integration tests')
    result = _cli(str(REPO / "configs/quickstart.yaml"), f"cluster.address=127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"flywheel: error: nothing answers at cluster.address '127.0.0.1:{port}' (Connection refused); start the head")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_algorithm_name_chooses_its_config_and_explicit_keys_win():
    dapo = load_config(REPO / "configs/quickstart.yaml", ["algorithm.name=dapo"]).algorithm
    assert (dapo.clip_low, dapo.clip_high, dapo.dynamic_sampling, dapo.overlong_filter) == (0.2, 0.28, True, True)
    mine = load_config(REPO / "configs/quickstart.yaml", ["algorithm.name=dapo", "algorithm.clip_high=0.3"]).algorithm
    assert mine.clip_high == 0.3 and mine.dynamic_sampling
    assert load_config(None, ["algorithm.name=ppo"]).algorithm.value_clip == 0.2
    assert load_config(None, ["algorithm.name=dr_grpo"]).algorithm.std_scale == "none"
    assert load_config(None, ["algorithm.name=cispo", "algorithm.clip_low=null"]).algorithm.clip_low is None


def _model_copy(tmp_path: Path, drop: str | None = None, corrupt: str | None = None) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for source in (REPO / "assets/tiny-adder").iterdir():
        if source.name != drop:
            (model / source.name).write_bytes(b"not safetensors" if source.name == corrupt else source.read_bytes())
    return model


@pytest.mark.parametrize(
    "drop, corrupt, expected",
    [
        ("tokenizer.json", None, "has no tokenizer files (tokenizer.json, tokenizer.model or vocab.json)"),
        (None, "model.safetensors", "weights file 'model.safetensors' cannot be read"),
        ("model.safetensors", None, "weights file 'model.safetensors' cannot be read"),
    ],
)
def test_broken_model_directory_is_one_sentence_at_load(tmp_path, drop, corrupt, expected):
    model = _model_copy(tmp_path, drop, corrupt)
    result = _cli(str(REPO / "configs/quickstart.yaml"), f"model.path={model}", cwd=tmp_path)
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_model_with_tied_embeddings_loads(tmp_path):
    model = _model_copy(tmp_path)  # the weight transport delivers lm_head.weight too (tests/integration/test_model_families.py)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"tie_word_embeddings": True}))
    assert load_config(None, [f"model.path={model}"]).model.path == str(model)


def test_loading_a_config_instantiates_no_environment(monkeypatch):
    from flywheel.envs import python_code

    monkeypatch.setattr(python_code.PythonCodeEnv, "__init__", lambda self, **kw: pytest.fail("instantiated at load"))
    assert load_config(None, ["task.name=python_code"]).task.name == "python_code"
