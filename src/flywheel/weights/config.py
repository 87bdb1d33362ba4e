"""Schema of the ``weights:`` section: the weight transport, keyed on ``name`` (imports no transport)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag


class FileTransportConfig(BaseModel):
    """The trainer writes each version to a file that every engine worker reads (weights/file.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    implementation: ClassVar[str] = "flywheel.weights.file:FileTransport"

    name: Literal["file"] = Field("file", description="Weight transport: 'file' (safetensors in a directory every engine can read).")
    directory: str | None = Field(
        None,
        description="Where the trainer writes the weights (in a folder of its own, removed at the end): null for /dev/shm on one node, a shared filesystem path for engines on other nodes.",
    )


def _name(value: Any) -> str | None:
    return value.get("name", "file") if isinstance(value, dict) else getattr(value, "name", None)


#: One member per transport; a section without ``name`` is the first one.
TransportConfig = Annotated[
    Annotated[FileTransportConfig, Tag("file")],
    Discriminator(_name, custom_error_type="unknown_transport", custom_error_message="weights.name must be one of: file"),
]
