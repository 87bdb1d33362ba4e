"""The engine: and weights: sections (keyed on name), their errors through the real CLI, and which
vLLM options apply where."""

import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import ConfigError, dump_config, load_config
from flywheel.config.engine import VLLMConfig
from flywheel.config.weights import FileTransportConfig
from flywheel.engines import engine_class
from flywheel.engines.vllm import VLLMEngine, engine_env, token_versions
from flywheel.weights import open_transport
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def test_sections_default_to_their_first_member_and_round_trip(tmp_path):
    config = load_config(REPO / "configs/quickstart.yaml", ["engine.kv_cache_gib=2", f"weights.directory={tmp_path}"])
    assert config.engine == VLLMConfig(kv_cache_gib=2)
    assert config.weights == FileTransportConfig(directory=str(tmp_path))
    saved = tmp_path / "config.yaml"
    saved.write_text(dump_config(config))
    assert load_config(saved) == config


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["engine.kv_cache=2"],
            "unknown key 'engine.kv_cache' (known keys here: name, gpu_memory_utilization, kv_cache_gib, max_num_seqs, max_num_batched_tokens, cpu_bind)",
        ),
        (["engine.kv_cache_gib=0"], "bad value for 'engine.kv_cache_gib': Input should be greater than or equal to 1 (got 0)"),
        (["engine.name=sglang"], "bad value for 'engine': engine.name must be one of: vllm"),
        (["rollout.kv_cache_gib=1"], "unknown key 'rollout.kv_cache_gib'"),
        (["weights.dir=/x"], "unknown key 'weights.dir' (known keys here: probe, probe_tolerance, shadow, name, directory)"),
        (["weights.name=collective", "weights.bucket_mb=0"], "bad value for 'weights.bucket_mb': Input should be greater than 0 (got 0)"),
        (["weights.name=nccl"], "bad value for 'weights': weights.name must be one of: file, collective"),
    ],
)
def test_bad_values_name_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(REPO / "configs/quickstart.yaml", overrides)
    assert expected in str(info.value)


def test_cli_names_the_engine_key(tmp_path):
    (tmp_path / "bad.yaml").write_text("engine:\n  name: vllm\n  cpu_bnd: '0'\n")
    (tmp_path / "assets").symlink_to(REPO / "assets")
    result = subprocess.run(
        [sys.executable, "-m", "flywheel.cli", "train", "bad.yaml"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown key 'engine.cpu_bnd'" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_config_chooses_the_implementations(tmp_path):
    assert engine_class(VLLMConfig()) is VLLMEngine
    transport = open_transport(FileTransportConfig(directory=str(tmp_path)), engines=1)
    assert isinstance(transport, FileTransport) and transport.directory.parent == tmp_path  # a folder of its own


def test_cpu_only_vllm_options_apply_only_on_cpu():
    config = load_config(REPO / "configs/quickstart.yaml", ["engine.kv_cache_gib=3", "engine.cpu_bind='0-1'"])
    assert engine_env(config.engine, cpu=True) == {
        "VLLM_LOGGING_LEVEL": "WARNING",
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_CPU_KVCACHE_SPACE": "3",
        "VLLM_CPU_OMP_THREADS_BIND": "0-1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the model runs in the engine core: one vLLM import fewer
    }
    assert engine_env(config.engine, cpu=False) == {"VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}


def test_token_versions_unroll_vllm_s_weight_version_spans():
    from vllm.outputs import WeightVersionSpan

    spans = [WeightVersionSpan("default", 0, 2), WeightVersionSpan("3", 2, 3), WeightVersionSpan("4", 3, 5)]
    assert token_versions(spans, 5) == (0, 0, 3, 4, 4)
    assert token_versions([], 0) == ()
    with pytest.raises(RuntimeError, match="vLLM labelled 5 of a completion's 6 tokens with a weight version"):
        token_versions(spans, 6)
