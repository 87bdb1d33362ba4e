"""flywheel: RL post-training for LLMs on Ray and vLLM. The Python API (``flywheel.api``):
``from flywheel import Config, train, evaluate``."""

from flywheel.api import RunResult, evaluate, train
from flywheel.config import Config, ConfigError

__all__ = ["Config", "ConfigError", "RunResult", "evaluate", "train"]
