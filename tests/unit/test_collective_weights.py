"""The collective transport's wire layout (exact offsets) and a real gloo broadcast over TCP loopback
between the transport and a receiver in another process."""

import multiprocessing
import pickle

import torch

from flywheel.weights.collective import ALIGN, CollectiveTransport, CollectiveWeights, Slot, pack, plan_buckets, unpack
from flywheel.weights.config import CollectiveTransportConfig


def state_dict() -> dict[str, torch.Tensor]:
    embed = torch.arange(12, dtype=torch.float32).view(4, 3)  # 48 bytes
    return {
        "embed.weight": embed,
        "norm.weight": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),  # 4 bytes
        "big.weight": torch.arange(40, dtype=torch.float32),  # 160 bytes: more than a bucket
        "lm_head.weight": embed,  # tied to embed
    }


def test_buckets_pack_tensors_in_order_at_aligned_offsets_a_larger_tensor_alone():
    unique = {k: v for k, v in state_dict().items() if k != "lm_head.weight"}
    # 48 + (pad to 64) + 4 = 68 <= 100; big.weight (160) starts a bucket of its own
    assert plan_buckets(unique, bucket_bytes=100) == [
        [Slot("embed.weight", "float32", (4, 3), 0), Slot("norm.weight", "bfloat16", (2,), ALIGN)],
        [Slot("big.weight", "float32", (40,), 0)],
    ]
    assert len(plan_buckets(unique, bucket_bytes=1000)) == 1
    for bucket in plan_buckets(unique, bucket_bytes=100):
        assert all(torch.equal(tensor, unique[name]) for name, tensor in unpack(pack(unique, bucket), bucket))


def receiver(inbox, outbox) -> None:
    """An engine worker's part: joins the group at the first update, receives each update sent to it."""
    link = None
    while (payload := inbox.get()) is not None:
        update = pickle.loads(payload)
        link = link or update.join(rank=1)
        outbox.put([(name, tensor.clone()) for name, tensor in update.receive(link)])


def test_published_versions_arrive_in_another_process_under_every_name():
    transport = CollectiveTransport(CollectiveTransportConfig(backend="gloo", bucket_mb=100 / 2**20, timeout_s=60), engines=1)
    ctx = multiprocessing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=receiver, args=(inbox, outbox))
    worker.start()
    try:
        for version in (0, 1):  # the second version travels over the group the first one formed
            state = {name: tensor + version for name, tensor in state_dict().items() if name != "lm_head.weight"}
            state["lm_head.weight"] = state["embed.weight"]
            update = transport.publish(state, version)
            assert isinstance(update, CollectiveWeights) and update.version == version and update.aliases == {"lm_head.weight": "embed.weight"}
            inbox.put(pickle.dumps(update))
            received = outbox.get(timeout=60)
            transport.wait()
            assert [name for name, _ in received] == ["embed.weight", "lm_head.weight", "norm.weight", "big.weight"]
            assert all(torch.equal(tensor, state[name]) for name, tensor in received)
    finally:
        inbox.put(None)
        worker.join(timeout=30)
        transport.close()
