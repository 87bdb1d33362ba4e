"""The trainer on the shipped tiny model, in process: a non-finite loss is reported and never applied."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from flywheel.algorithms.aggregation import LossTotals
from flywheel.config import load_config
from flywheel.trainer.trainer import Trainer
from flywheel.types import TrainBatch
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def batch(advantage: float) -> TrainBatch:
    tokens = torch.tensor([[4, 5, 6, 1], [4, 5, 7, 1]])
    mask = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    return TrainBatch(tokens, torch.ones_like(tokens), mask, torch.zeros(2, 4), torch.full((2, 4), advantage) * mask)


def test_nonfinite_step_is_skipped_and_weights_unchanged(tmp_path):
    trainer = Trainer(load_config(REPO / "configs/quickstart.yaml", ["trainer.minibatches=1"]), FileTransport(tmp_path))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.train_step([batch(math.nan)]).metrics
    assert metrics["train/nonfinite_skipped"] == 1.0
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())

    metrics = trainer.train_step([batch(1.0)]).metrics
    assert metrics["train/nonfinite_skipped"] == 0.0 and math.isfinite(metrics["loss/policy"])
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def ragged_batch() -> TrainBatch:
    """4 rows of different completion lengths, with advantages of both signs."""
    tokens = torch.tensor([[4, 5, 6, 1, 0, 0], [4, 5, 7, 7, 7, 1], [4, 5, 8, 1, 0, 0], [4, 5, 9, 9, 1, 0]])
    attention = (torch.arange(6) < torch.tensor([4, 6, 4, 5])[:, None]).long()
    mask = attention.float() * (torch.arange(6) >= 2)
    advantages = torch.tensor([1.0, -0.5, 0.25, -1.0])[:, None] * mask
    return TrainBatch(tokens, attention, mask, torch.zeros(4, 6), advantages)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_a_step_cut_into_micro_batches_equals_the_uncut_step(tmp_path, aggregation):
    config = load_config(REPO / "configs/quickstart.yaml", [f"algorithm.aggregation={aggregation}", "algorithm.entropy_coef=0.01"])
    whole, cut = Trainer(config, FileTransport(tmp_path / "a")), Trainer(config, FileTransport(tmp_path / "b"))
    batch = ragged_batch()
    batch = replace(batch, old_logprobs=whole.logprobs(batch))
    totals = LossTotals.of(batch.loss_mask, norm_tokens=8)
    loss = whole.forward_backward(batch, totals)["loss/policy"]
    # uneven micro-batches (1 row, then 3), each normalised by the whole step's totals
    first, rest = (
        replace(
            batch,
            **{f: getattr(batch, f)[rows] for f in ("tokens", "attention_mask", "loss_mask", "behaviour_logprobs", "advantages", "old_logprobs")},
        )
        for rows in (slice(0, 1), slice(1, 4))
    )
    parts = cut.forward_backward(first, totals)["loss/policy"] + cut.forward_backward(rest, totals)["loss/policy"]
    assert abs(loss - parts) < 1e-6  # packed forwards of other row sets: fp32 rounding
    for (name, a), b in zip(whole.model.named_parameters(), cut.model.parameters()):  # the accumulated gradients
        torch.testing.assert_close(a.grad.full_tensor(), b.grad.full_tensor(), atol=2e-6, rtol=1e-5)


def test_ppo_value_loss_clips_against_the_rollout_time_values(tmp_path):
    """Two minibatches: the critic's first update moves the second minibatch's values away from those
    it gave at rollout time, by more than value_clip, so the clipped term is active (the loop used to
    recompute the 'old' values just before the update, and nothing ever clipped)."""
    config = load_config(
        REPO / "configs/quickstart.yaml", ["algorithm.name=ppo", "algorithm.critic_lr=0.01", "algorithm.value_clip=0.01", "trainer.minibatches=2"]
    )
    trainer = Trainer(config, FileTransport(tmp_path))
    batch = ragged_batch()
    values = trainer.values(batch)
    returns = torch.tensor([5.0, -5.0, 5.0, -5.0])[:, None] * batch.loss_mask
    metrics = trainer.train_step(replace(batch, returns=returns, old_values=values).split(2)).metrics
    assert metrics["loss/value_clip_frac"] > 0.2


def test_mismatch_kl_counts_only_tokens_sampled_by_the_weights_being_trained(tmp_path):
    """An async batch mixes tokens sampled by the trainer's current weights (version 1 here) with
    stale ones (version 0). The stale tokens' policy lag is behaviour KL, not trainer/engine mismatch:
    train/mismatch_kl is the mean over the version-1 tokens only; train/behaviour_kl over every token."""
    trainer = Trainer(load_config(REPO / "configs/quickstart.yaml", ["trainer.minibatches=1"]), FileTransport(tmp_path))
    trainer.version = 1
    batch = ragged_batch()
    lag = torch.tensor([0.0, 0.5, 0.0, 0.5])[:, None] * batch.loss_mask  # rows 1 and 3: sampled by older weights
    versions = torch.tensor([1, 0, 1, 0])[:, None] * batch.loss_mask.long() - (1 - batch.loss_mask.long())
    behaviour = (trainer.logprobs(batch) - lag) * batch.loss_mask
    metrics = trainer.train_step([replace(batch, behaviour_logprobs=behaviour, weight_versions=versions)]).metrics

    assert metrics["train/mismatch_kl"] < 1e-6 and metrics["train/mismatch_abs_diff"] < 1e-5
    stale_tokens, all_tokens = batch.loss_mask[[1, 3]].sum().item(), batch.loss_mask.sum().item()
    expected = (math.exp(0.5) - 0.5 - 1.0) * stale_tokens / all_tokens  # exp(r) - r - 1 at r = 0.5, on the stale share
    assert abs(metrics["train/behaviour_kl"] - expected) < 1e-5, (metrics["train/behaviour_kl"], expected)

    trainer.version = 2  # nothing in a batch of versions 0 and 1 was sampled by version 2: no mismatch to report
    assert "train/mismatch_kl" not in trainer.train_step([replace(batch, behaviour_logprobs=behaviour, weight_versions=versions)]).metrics


def test_a_one_rank_trainer_needs_no_port(tmp_path):
    """A rendezvous port is free when picked and can be taken by another process before rank 0 binds it (two
    runs starting at once did); a group of one rank meets through an in-process store and never binds one."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        code = f"from flywheel.trainer.distributed import join; import torch.distributed as d; join(0, 1, {address!r}); print(d.get_world_size())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr[-2000:]


def test_two_ranks_meet_at_a_store_bound_to_a_port_the_os_picked():
    """Several ranks meet at a TCP store served by another process (a group's store host), bound to port 0: no port
    is picked ahead of its bind. Two processes join through it and all-reduce."""
    import subprocess
    import sys

    from flywheel.trainer.distributed import open_store, store_address

    store = open_store("127.0.0.1")
    address = store_address(store)
    assert address.startswith("127.0.0.1:") and int(address.split(":")[1]) > 0
    code = (
        "import sys, torch, torch.distributed as d; from flywheel.trainer.distributed import join; "
        f"r = int(sys.argv[1]); join(r, 2, {address!r}); t = torch.tensor([r + 1.0]); d.all_reduce(t); print(t.item())"
    )
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outputs = [rank.communicate(timeout=120) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err[-2000:] for _, err in outputs]
    assert [out.strip() for out, _ in outputs] == ["3.0", "3.0"]
