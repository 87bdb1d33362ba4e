"""vLLM engine: the only module of flywheel that imports vllm.

Weights are updated in place through vLLM's own hooks: a ``worker_extension_cls`` method, run on
every worker by ``collective_rpc``, feeds the published safetensors file to the model runner's
``reload_weights``. The prefix cache is reset afterwards, since it holds keys of the old weights.
"""

from __future__ import annotations

import os

from flywheel.config import Config
from flywheel.types import Completion


class WeightReloadExtension:
    """Mixed into vLLM's worker class (``worker_extension_cls``); runs inside the worker process."""

    def reload_weights_from_file(self, path: str) -> None:
        from safetensors import safe_open

        def weights():
            with safe_open(path, framework="pt") as f:
                for name in f.keys():
                    yield name, f.get_tensor(name)

        self.model_runner.reload_weights(weights_iterator=weights())


def engine_env(config: Config) -> dict[str, str]:
    """Environment variables the engine's process needs (set before vllm is imported)."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": str(config.rollout.kv_cache_gib),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine core runs inside this (actor) process
        "VLLM_LOGGING_LEVEL": "WARNING",
        "TOKENIZERS_PARALLELISM": "false",
    }


class VLLMEngine:
    def __init__(self, config: Config) -> None:
        for key, value in engine_env(config).items():
            os.environ.setdefault(key, value)
        from vllm import LLM

        self.llm = LLM(
            model=config.model.path,
            dtype=config.model.dtype,
            seed=config.run.seed,
            enforce_eager=True,
            gpu_memory_utilization=config.rollout.gpu_memory_utilization,
            worker_extension_cls=f"{__name__}.WeightReloadExtension",
        )
        self.weight_version = 0

    def generate(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams, TokensPrompt

        params = [
            SamplingParams(
                n=n, temperature=temperature, max_tokens=max_tokens, logprobs=0, seed=seed + i, stop=stop, include_stop_str_in_output=True
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [
            [
                Completion(
                    token_ids=list(c.token_ids),
                    logprobs=[step[token].logprob for step, token in zip(c.logprobs, c.token_ids)],
                    text=c.text,
                    weight_version=self.weight_version,
                    truncated=c.finish_reason == "length",
                )
                for c in out.outputs
            ]
            for out in outputs
        ]

    def load_weights(self, path: str, version: int) -> None:
        self.llm.collective_rpc("reload_weights_from_file", args=(path,))
        self.llm.reset_prefix_cache()
        self.weight_version = version
