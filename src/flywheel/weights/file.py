"""Weight transport through a file: the trainer writes a safetensors file, every engine worker reads it.

The directory must be readable where the engines run: node-local /dev/shm (RAM-backed, the default)
for one node, a shared filesystem for several. Tensors never travel inside RPC arguments (vLLM's
``collective_rpc`` pickles them); the handle, a path, does.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from flywheel.config.weights import FileTransportConfig
from flywheel.weights.base import WeightUpdate, digest, split_aliases


@dataclass(frozen=True)
class FileWeights(WeightUpdate):
    """Version ``version`` of the weights, in the safetensors file at ``path``."""

    path: Path

    def receive(self, link: None = None) -> Iterator[tuple[str, torch.Tensor]]:
        with safe_open(str(self.path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (a safetensors file, not a dict)
                yield name, f.get_tensor(name)
            for alias, name in json.loads(f.metadata()["aliases"]).items():
                yield alias, f.get_tensor(name)


@dataclass(frozen=True)
class FileTransport:
    """Publishes each version as ``directory/weights-v{version}.safetensors``; owns ``directory``."""

    directory: Path

    @classmethod
    def from_config(cls, config: FileTransportConfig, engines: int) -> FileTransport:
        """A transport in a new folder of its own under ``config.directory`` (default: /dev/shm when it
        exists, else the system temporary directory), read by any number of ``engines``."""
        root = Path(config.directory or ("/dev/shm" if Path("/dev/shm").is_dir() else tempfile.gettempdir()))
        return cls(root / f"flywheel-{os.getpid()}-{secrets.token_hex(4)}")

    def publish(self, state_dict: Mapping[str, torch.Tensor], version: int) -> FileWeights:
        """Writes the weights atomically (a reader never sees a partial file), then removes older versions.

        Tied parameters (one storage under two names, e.g. embeddings and lm_head) are written once,
        under their first name, as Hugging Face checkpoints store them; the file's metadata maps their
        other names to it, and ``receive`` yields the tensor under each name. The handle carries each
        written tensor's digest, which every engine worker checks (``WeightUpdate.verified``).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        unique, aliases = split_aliases(state_dict)
        path = self.directory / f"weights-v{version}.safetensors"
        partial = path.with_suffix(".partial")
        save_file(unique, str(partial), metadata={"version": str(version), "aliases": json.dumps(aliases)})
        partial.rename(path)
        for old in self.directory.glob("weights-v*.safetensors"):
            if old != path:
                old.unlink(missing_ok=True)
        return FileWeights(version, path, digests={name: digest(tensor) for name, tensor in unique.items()})

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
