"""flywheel's vLLM plugin: vLLM's own plugin loading (the entry point in pyproject.toml) makes the
"flywheel" weight-transfer backend known, lazily, and loading it again is harmless."""

import subprocess
import sys

PROBE = """
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
from vllm.plugins import load_general_plugins
import sys
assert "flywheel.engines.vllm_transfer" not in sys.modules
load_general_plugins()
assert "flywheel.engines.vllm_transfer" not in sys.modules  # registered by name, imported on first use
from flywheel.engines.vllm_plugin import BACKEND, register
register()  # a second registration in the same process is ignored
from flywheel.engines.vllm_transfer import FlywheelTransferEngine
print(WeightTransferEngineFactory._registry[BACKEND]() is FlywheelTransferEngine)
"""


def test_vllms_plugin_loading_registers_the_flywheel_backend():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"
