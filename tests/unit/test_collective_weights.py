"""The collective transport's wire layout (exact offsets) and a real gloo broadcast over TCP loopback
between the transport and a receiver in another process."""

import multiprocessing
import pickle
import time

import torch

from flywheel.config.weights import CollectiveTransportConfig
from flywheel.weights.base import WeightsCorrupt
from flywheel.weights.collective import ALIGN, CollectiveTransport, CollectiveWeights, Slot, pack, plan_buckets, unpack


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
        outbox.put([(name, tensor.clone()) for name, tensor in update.verified(link)])


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


def member(slot: int, inbox, outbox) -> None:
    """Engine replica ``slot``'s worker: joins each new group at its slot rank (1 + slot), receives
    each update sent to it."""
    group, link = None, None
    while (payload := inbox.get()) is not None:
        update = pickle.loads(payload)
        if update.group != group:
            group, link = update.group, update.join(rank=1 + slot)
        try:
            outbox.put((update.version, update.group, [(name, tensor.clone()) for name, tensor in update.verified(link)]))
        except WeightsCorrupt as error:
            outbox.put((update.version, update.group, str(error)))
        except RuntimeError:  # the sender left the group mid-send
            outbox.put((update.version, update.group, None))


def test_rejoin_re_forms_the_group_without_a_dead_member_and_re_sends_the_latest_version():
    """Two replicas; slot 0's worker is killed, and version 1's send to the group fails fast (or
    slot 1's receive does: gloo sends along a tree) instead of waiting for it. ``rejoin([1])`` forms a
    new group of slot 1 alone (its worker is rank 1 there) and sends version 1 again, all well before
    the timeout. (A member that stops receiving but keeps its connections open is not covered: a
    receiver waiting on it waits until the timeout; see weights/collective.py.)"""
    timeout_s = 60
    transport = CollectiveTransport(CollectiveTransportConfig(backend="gloo", bucket_mb=100 / 2**20, timeout_s=timeout_s), engines=2)
    ctx = multiprocessing.get_context("spawn")
    boxes = [(ctx.Queue(), ctx.Queue()) for _ in range(2)]
    workers = [ctx.Process(target=member, args=(slot, *box)) for slot, box in enumerate(boxes)]
    for worker in workers:
        worker.start()
    try:
        first = transport.publish(state_dict(), 0)
        assert (first.members, first.world_size) == ((0, 1), 3)
        for inbox, _ in boxes:
            inbox.put(pickle.dumps(first))
        assert [outbox.get(timeout=timeout_s)[0] for _, outbox in boxes] == [0, 0]
        transport.wait()

        workers[0].kill()
        workers[0].join()
        moved = {name: tensor + 1 for name, tensor in state_dict().items()}
        stalled = transport.publish(moved, 1)
        boxes[1][0].put(pickle.dumps(stalled))  # slot 1 may get it or not (gloo sends along a tree)
        started = time.monotonic()
        again = transport.rejoin([1])
        assert (again.version, again.members, again.world_size) == (1, (1,), 2) and again.group != stalled.group
        boxes[1][0].put(pickle.dumps(again))
        received = [boxes[1][1].get(timeout=timeout_s) for _ in range(2)]
        transport.wait()
        assert time.monotonic() - started < timeout_s / 4
        assert received[0][:2] == (1, stalled.group)  # arrived or failed, whichever gloo's tree made it
        version, group, tensors = received[1]
        assert (version, group) == (1, again.group)
        assert all(torch.equal(tensor, moved[name]) for name, tensor in tensors if name != "lm_head.weight")
    finally:
        for inbox, _ in boxes:
            inbox.put(None)
        for worker in workers:
            worker.join(timeout=5)
            worker.kill()
        transport.close()


class FlakyWire(CollectiveTransport):
    """A transport whose first send flips one byte of the last bucket on the wire (a fault in transit):
    the buffers it keeps, and re-sends, are intact."""

    flipped = False

    def _send_gloo(self, link, buffers):
        if not self.flipped:
            self.flipped = True
            buffers = [b.clone() for b in buffers]
            buffers[-1][-1] ^= 0x40
        super()._send_gloo(link, buffers)


def test_a_tensor_corrupt_in_transit_is_refused_and_the_re_sent_version_passes():
    """The member refuses version 0 naming the tensor (big.weight ends the last bucket); ``rejoin``
    with the same member re-sends the kept snapshot, which passes every digest."""
    transport = FlakyWire(CollectiveTransportConfig(backend="gloo", bucket_mb=100 / 2**20, timeout_s=60), engines=1)
    ctx = multiprocessing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(target=member, args=(0, inbox, outbox))
    worker.start()
    try:
        update = transport.publish(state_dict(), 0)
        inbox.put(pickle.dumps(update))
        version, _, refused = outbox.get(timeout=60)
        assert version == 0 and "weights version 0: tensor big.weight arrived with digest" in refused
        again = transport.rejoin([0])
        inbox.put(pickle.dumps(again))
        version, group, tensors = outbox.get(timeout=60)
        transport.wait()
        assert (version, group) == (0, again.group) and again.digests == update.digests
        assert [name for name, _ in tensors] == ["embed.weight", "lm_head.weight", "norm.weight", "big.weight"]
        assert all(torch.equal(tensor, state_dict()[name]) for name, tensor in tensors)
    finally:
        inbox.put(None)
        worker.join(timeout=30)
        worker.kill()
        transport.close()
