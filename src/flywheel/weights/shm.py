"""Weight transport through shared memory: the trainer writes a safetensors file, engines read it by path.

Tensors never travel inside RPC arguments (vLLM's collective_rpc pickles them); a path does.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file


def default_directory() -> Path:
    """/dev/shm when it exists (RAM-backed), else the system temporary directory."""
    root = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    return root / f"flywheel-{os.getpid()}"


def publish(state_dict: dict[str, torch.Tensor], directory: Path, version: int) -> Path:
    """Writes weights of ``version`` atomically and removes older versions; returns the file path.

    Tied parameters (one storage under two names, e.g. embeddings and lm_head) are written once,
    under their first name, as Hugging Face checkpoints store them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    unique = {}
    for name, tensor in state_dict.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[name] = tensor.detach().contiguous()
    path = directory / f"weights-v{version}.safetensors"
    partial = path.with_suffix(".partial")
    save_file(unique, str(partial), metadata={"version": str(version)})
    partial.rename(path)
    for old in directory.glob("weights-v*.safetensors"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
