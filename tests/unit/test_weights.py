"""The file weight transport: what the trainer publishes is what every engine worker receives, and a
worker refuses a tensor whose bytes are not what the trainer published."""

import json
import pickle
import shutil
import struct

import pytest
import torch
from safetensors import safe_open

from flywheel.weights.base import WeightsCorrupt, digest, split_aliases
from flywheel.weights.file import FileTransport, FileWeights


def state_dict() -> dict[str, torch.Tensor]:
    embed = torch.arange(6, dtype=torch.float32).view(3, 2)
    return {"embed.weight": embed, "layer.bias": torch.tensor([0.5, -1.0]), "lm_head.weight": embed}  # tied to embed


def test_receive_yields_every_published_name_tied_tensors_stored_once(tmp_path):
    update = FileTransport(tmp_path / "w").publish(state_dict(), version=3)
    assert update == FileWeights(3, tmp_path / "w/weights-v3.safetensors", digests={n: digest(t) for n, t in split_aliases(state_dict())[0].items()})
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


def flip_byte(path, tensor: str) -> None:
    """Flips one byte of ``tensor``'s data in the safetensors file at ``path`` (a fault in transit)."""
    raw = bytearray(path.read_bytes())
    header_bytes = struct.unpack("<Q", raw[:8])[0]
    data_end = json.loads(raw[8 : 8 + header_bytes])[tensor]["data_offsets"][1]
    raw[8 + header_bytes + data_end - 1] ^= 0x40
    path.write_bytes(raw)


@pytest.mark.parametrize("tensor", ["layer.bias", "embed.weight"])  # embed.weight: the tied tensor (lm_head's too)
def test_a_tensor_corrupt_in_transit_is_refused_before_it_is_yielded(tmp_path, tensor):
    update = FileTransport(tmp_path / "w").publish(state_dict(), version=3)
    assert list(update.verified()) and all(update.digests.values())  # intact: every tensor passes
    flip_byte(update.path, tensor)
    received = []
    with pytest.raises(
        WeightsCorrupt, match=rf"weights version 3: tensor {tensor} arrived with digest [0-9a-f]{{16}}, the trainer published"
    ) as raised:
        received.extend(name for name, _ in pickle.loads(pickle.dumps(update)).verified())
    assert tensor not in received and "lm_head.weight" not in received  # the alias of a corrupt tensor neither
    assert WeightsCorrupt.in_error(RuntimeError(f"Call to update_weights failed: {raised.value}\nTraceback")) == raised.value.sentence


def test_a_stale_file_under_a_new_version_is_refused(tmp_path):
    """The transport hands out version 2, but the file holds version 1's tensors (a copy that never
    happened, an engine reading a cached file)."""
    transport = FileTransport(tmp_path / "w")
    kept = tmp_path / "v1.safetensors"
    shutil.copy(transport.publish(state_dict(), version=1).path, kept)
    moved = {name: tensor + 1 for name, tensor in state_dict().items()}
    moved["lm_head.weight"] = moved["embed.weight"]
    update = transport.publish(moved, version=2)
    shutil.copy(kept, update.path)
    with pytest.raises(WeightsCorrupt, match="weights version 2: tensor embed.weight arrived"):
        list(update.verified())


def test_a_tensor_that_never_arrives_is_named():
    class Short(FileWeights):
        def receive(self, link=None):
            yield "embed.weight", state_dict()["embed.weight"]

    update = Short(4, None, digests={"embed.weight": digest(state_dict()["embed.weight"]), "layer.bias": 1})
    with pytest.raises(WeightsCorrupt, match=r"weights version 4: tensor layer.bias never arrived \(1 missing\)"):
        list(update.verified())
