"""Micro-batch planning, packing and unpacking, per-sequence attention, and dealing rows to ranks: exact values."""

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from flywheel.algorithms.aggregation import LossTotals
from flywheel.config import load_config
from flywheel.trainer.attention import VARLEN, by_length, cu_seq_lens, varlen_attention
from flywheel.trainer.group import deal_rows
from flywheel.trainer.logprobs import token_logprobs
from flywheel.trainer.packing import Packed, plan_microbatches
from flywheel.trainer.trainer import Trainer
from flywheel.types import TrainBatch
from flywheel.weights.file import FileTransport

REPO = Path(__file__).resolve().parents[2]


def test_plan_fills_micro_batches_longest_first_within_the_budget():
    # lengths 5, 9, 3, 7, 2 with budget 10: 9 -> [1]; 7 -> [3]; 5 -> [0]; 3 fits beside 7 ([3, 2]);
    # 2 fits beside 5 ([0, 4]). A row longer than the budget gets a micro-batch of its own.
    assert plan_microbatches([5, 9, 3, 7, 2], 10) == [[1], [2, 3], [0, 4]]
    assert plan_microbatches([12, 1], 10) == [[0], [1]]
    assert plan_microbatches([], 10) == []


def test_pack_lays_rows_end_to_end_and_unpacks_to_the_padded_layout():
    tokens = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0], [3, 4, 5, 6]])
    rows = Packed.of(tokens, (tokens > 0).long())
    assert rows.lengths == [3, 2, 4]
    assert rows.input_ids.tolist() == [[5, 6, 7, 8, 9, 3, 4, 5, 6]]
    assert rows.position_ids.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    assert rows.next_tokens().tolist() == [6, 7, 0, 9, 0, 4, 5, 6, 0]  # 0 where a sequence ends
    assert rows.model_inputs()["cu_seq_lens_q"].tolist() == [0, 3, 5, 9]
    # the value computed at packed position p concerns the token after it: row b's column t reads position t - 1
    view = rows.next_token_view(torch.arange(1.0, 10.0), width=4)
    assert view.tolist() == [[0, 1, 2, 0], [0, 4, 0, 0], [0, 6, 7, 8]]


def test_per_sequence_attention_equals_causal_attention_of_each_sequence_alone():
    torch.manual_seed(0)
    lengths = [3, 5, 3, 1]
    q, k, v = (torch.randn(1, heads, 12, 8, requires_grad=True) for heads in (4, 2, 2))  # 4 query heads, 2 kv heads
    weights = torch.randn(1, 12, 4, 8)
    packed, _ = varlen_attention(None, q, k, v, None, scaling=0.3, cu_seq_lens_q=cu_seq_lens(lengths))
    packed_grads = torch.autograd.grad((packed * weights).sum(), (q, k, v))
    start, alone_loss = 0, 0.0
    for n in lengths:
        part = slice(start, start + n)
        alone = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, part], k[:, :, part], v[:, :, part], is_causal=True, scale=0.3, enable_gqa=True
        ).transpose(1, 2)
        torch.testing.assert_close(packed[:, part], alone, atol=1e-6, rtol=0)
        alone_loss = alone_loss + (alone * weights[:, part]).sum()
        start += n
    for packed_grad, alone_grad in zip(packed_grads, torch.autograd.grad(alone_loss, (q, k, v))):
        torch.testing.assert_close(packed_grad, alone_grad, atol=1e-6, rtol=0)


def test_positions_in_length_order_keep_packed_order_within_a_length():
    positions, runs = by_length(cu_seq_lens([3, 5, 3, 1]))
    assert positions.tolist() == [11, 0, 1, 2, 8, 9, 10, 3, 4, 5, 6, 7]
    assert runs == [(1, 1), (3, 2), (5, 1)]


def test_packed_logprobs_equal_padded_ones_on_the_shipped_model():
    padded_model = AutoModelForCausalLM.from_pretrained(REPO / "assets/tiny-adder")
    packed_model = AutoModelForCausalLM.from_pretrained(REPO / "assets/tiny-adder", attn_implementation=VARLEN)
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([9, 17, 4, 17, 12])
    attention = (torch.arange(17) < lengths[:, None]).long()
    tokens = torch.randint(2, 15, (5, 17), generator=g) * attention
    padded, padded_entropy = token_logprobs(padded_model, tokens, attention, with_entropy=True)
    packed, packed_entropy = token_logprobs(packed_model, tokens, attention, with_entropy=True, packed=True)
    torch.testing.assert_close(packed, padded * attention, atol=2e-5, rtol=0)
    torch.testing.assert_close(packed_entropy, padded_entropy * attention, atol=2e-5, rtol=0)


def test_rows_are_dealt_so_every_rank_holds_a_share_of_every_minibatch():
    # 10 rows, 2 minibatches ([0..4], [5..9]), 2 ranks: rank r takes rows r, r + 2, ... of each
    assert [[rows.tolist() for rows in rank] for rank in deal_rows(10, 2, 2)] == [[[0, 2, 4], [5, 7, 9]], [[1, 3], [6, 8]]]


def test_activation_checkpointing_gives_the_same_gradients(tmp_path):
    config = load_config(REPO / "configs/quickstart.yaml", ["trainer.minibatches=1"])
    plain = Trainer(config, FileTransport(tmp_path / "a"))
    recomputing = Trainer(
        config.model_copy(update={"trainer": config.trainer.model_copy(update={"activation_checkpointing": True})}), FileTransport(tmp_path / "b")
    )
    tokens = torch.tensor([[4, 5, 6, 1], [4, 5, 7, 7]])
    mask = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    batch = TrainBatch(tokens, torch.ones_like(tokens), mask, torch.zeros(2, 4), torch.tensor([[1.0], [-1.0]]) * mask)
    totals = LossTotals.of(batch.loss_mask, norm_tokens=8)
    for trainer in (plain, recomputing):
        trainer.forward_backward(batch, totals)
    for a, b in zip(plain.model.parameters(), recomputing.model.parameters()):
        torch.testing.assert_close(a.grad.full_tensor(), b.grad.full_tensor(), atol=1e-7, rtol=1e-6)
