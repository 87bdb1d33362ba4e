"""Schema of the ``weights:`` section: the weight transport, keyed on ``name`` (imports no transport)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag


class VersionProof(BaseModel):
    """How each weight version is proven on the engines beyond the digests, which are always checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    probe: bool = Field(
        True,
        description="After each load, every engine replica computes the logprobs of a fixed set of token sequences (2 x 16 tokens) and compares "
        "them with the trainer's for the same version; a gap over probe_tolerance refuses the version as a corrupt copy is (weights/probe.py).",
    )
    probe_tolerance: float | None = Field(
        None, gt=0, description="Largest |engine - trainer| logprob a probe token may show; null: by model.dtype (float32 0.01, bfloat16 1.0)."
    )
    shadow: bool = Field(
        True,
        description="Each engine worker loads a new version into a shadow copy of the model while it goes on generating with the version "
        "before, and switches between two engine steps: the pause is the switch, not the load. Costs one more copy of the weights per "
        "engine worker; false pauses generation for the whole load. Not with vLLM's NCCL receiver (the collective transport on GPU).",
    )


class FileTransportConfig(VersionProof):
    """The trainer writes each version to a file that every engine worker reads (weights/file.py)."""

    implementation: ClassVar[str] = "flywheel.weights.file:FileTransport"
    engines_can_rejoin: ClassVar[bool] = True  # a replacement replica reads the latest file

    name: Literal["file"] = Field("file", description="Weight transport: 'file' (safetensors in a directory every engine can read).")
    directory: str | None = Field(
        None,
        description="Where the trainer writes the weights (in a folder of its own, removed at the end): null for /dev/shm on one node, a shared filesystem path for engines on other nodes.",
    )

    def engine_backend(self, cuda: bool) -> str:
        """The vLLM weight-transfer backend the engines need for this transport."""
        return "flywheel"


class CollectiveTransportConfig(VersionProof):
    """Trainer rank 0 broadcasts each version to every engine worker over one process group (weights/collective.py)."""

    implementation: ClassVar[str] = "flywheel.weights.collective:CollectiveTransport"
    engines_can_rejoin: ClassVar[bool] = False  # a newcomer joins a re-formed group (the router's rejoin), not any time

    name: Literal["collective"] = Field(
        "collective",
        description="Weight transport: 'collective' (a broadcast from trainer rank 0 to every engine worker through vLLM's weight-transfer API).",
    )
    backend: Literal["auto", "nccl", "gloo"] = Field(
        "auto",
        description="Process-group backend: 'nccl' (GPU tensors, vLLM's own NCCL engine), 'gloo' (TCP, CPU tensors), 'auto' for nccl where CUDA is visible, else gloo.",
    )
    bucket_mb: float = Field(
        256.0,
        gt=0,
        description="Tensors travel packed in buckets of at most this many MiB (a larger tensor travels alone); the receivers hold one bucket at a time.",
    )
    timeout_s: float = Field(600.0, gt=0, description="Seconds a join or a send waits for every engine worker before it fails.")

    def resolved_backend(self, cuda: bool) -> Literal["nccl", "gloo"]:
        return ("nccl" if cuda else "gloo") if self.backend == "auto" else self.backend

    def engine_backend(self, cuda: bool) -> str:
        """The vLLM weight-transfer backend the engines need: vLLM's 'nccl' engine, else flywheel's (gloo)."""
        return "nccl" if self.resolved_backend(cuda) == "nccl" else "flywheel"


def _name(value: Any) -> str | None:
    return value.get("name", "file") if isinstance(value, dict) else getattr(value, "name", None)


#: One member per transport; a section without ``name`` is the first one.
TransportConfig = Annotated[
    Annotated[FileTransportConfig, Tag("file")] | Annotated[CollectiveTransportConfig, Tag("collective")],
    Discriminator(_name, custom_error_type="unknown_transport", custom_error_message="weights.name must be one of: file, collective"),
]
