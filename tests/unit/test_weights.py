"""The file weight transport: what the trainer publishes is what every engine worker receives."""

import pickle

import torch
from safetensors import safe_open

from flywheel.weights.base import split_aliases
from flywheel.weights.file import FileTransport, FileWeights


def state_dict() -> dict[str, torch.Tensor]:
    embed = torch.arange(6, dtype=torch.float32).view(3, 2)
    return {"embed.weight": embed, "layer.bias": torch.tensor([0.5, -1.0]), "lm_head.weight": embed}  # tied to embed


def test_receive_yields_every_published_name_tied_tensors_stored_once(tmp_path):
    update = FileTransport(tmp_path / "w").publish(state_dict(), version=3)
    assert update == FileWeights(3, tmp_path / "w/weights-v3.safetensors")
    with safe_open(str(update.path), framework="pt") as f:
        assert list(f.keys()) == ["embed.weight", "layer.bias"]  # lm_head.weight is not stored again
    received = list(pickle.loads(pickle.dumps(update)).receive())  # the handle travels pickled
    assert [name for name, _ in received] == ["embed.weight", "layer.bias", "lm_head.weight"]
    received = dict(received)
    assert torch.equal(received["embed.weight"], state_dict()["embed.weight"])
    assert torch.equal(received["lm_head.weight"], state_dict()["embed.weight"])
    assert torch.equal(received["layer.bias"], torch.tensor([0.5, -1.0]))


def test_split_aliases_maps_later_names_of_a_shared_tensor_to_the_first():
    unique, aliases = split_aliases(state_dict())
    assert list(unique) == ["embed.weight", "layer.bias"] and aliases == {"lm_head.weight": "embed.weight"}
    assert split_aliases({"a": torch.zeros(2), "b": torch.zeros(2)})[1] == {}  # equal values, distinct storage


def test_a_new_version_retires_the_older_ones_and_close_removes_the_folder(tmp_path):
    transport = FileTransport(tmp_path / "w")
    transport.publish(state_dict(), version=0)
    latest = transport.publish(state_dict(), version=1)
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["weights-v1.safetensors"]
    assert latest.path.is_file()
    transport.close()
    assert not (tmp_path / "w").exists() and tmp_path.exists()
