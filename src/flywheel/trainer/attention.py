"""Variable-length attention for packed sequences on any device: a transformers attention
implementation (``VARLEN``) that runs causal SDPA per sequence, batching sequences of equal length
together, so a packed micro-batch costs sum(n_i^2), not (sum n_i)^2 as a block-diagonal mask would.

The packed positions are reordered once, by one gather, so that sequences of equal length lie side
by side (stable: in packed order within a length); each length is then a view [rows, n, H, D] of
that reordered tensor, and the outputs are put back by the inverse gather. The work in Python and
the number of tensor operations grow with the number of distinct lengths, not with the number of
sequences, and no token changes place in the linear layers around the attention.
Sequence boundaries come from ``cu_seq_lens_q`` (the flash-attention keyword transformers forwards to
attention functions); without it each row is one sequence (right padding never reaches a real token
under a causal mask). On GPU with flash-attn installed, "flash_attention_2" does the same natively.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

VARLEN = "flywheel_varlen"


def by_length(cu: torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """Sequence boundaries [S + 1] -> (the packed positions in length order [L], and the (length,
    sequences) of each run of equal lengths in that order)."""
    lengths = cu.diff().long().cpu()
    order = torch.sort(lengths, stable=True).indices
    sorted_lengths = lengths[order]
    starts = cu[:-1].long().cpu()[order]
    first = sorted_lengths.cumsum(0) - sorted_lengths  # where each sequence begins in the reordered tensor
    total = int(sorted_lengths.sum())
    positions = torch.arange(total) + (starts - first).repeat_interleave(sorted_lengths, output_size=total)
    values, counts = torch.unique_consecutive(sorted_lengths, return_counts=True)
    return positions.to(cu.device), list(zip(values.tolist(), counts.tolist()))


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, H, L, D], key and value [B, H_kv, L, D] -> ([B, L, H, D], None), causal within each sequence."""
    gqa = query.shape[1] != key.shape[1]
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling, enable_gqa=gqa)
        return out.transpose(1, 2), None
    positions, runs = by_length(cu)
    reordered = [x[0].transpose(0, 1).index_select(0, positions) for x in (query, key, value)]  # [L, H, D] in length order
    pieces, start = [], 0
    for n, rows in runs:
        q, k, v = (x[start : start + rows * n].unflatten(0, (rows, n)).transpose(1, 2) for x in reordered)  # [rows, H, n, D]
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=gqa)
        pieces.append(o.transpose(1, 2).flatten(0, 1))  # [rows * n, H, D]
        start += rows * n
    out = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
    return out.index_select(0, torch.argsort(positions))[None], None


def cu_seq_lens(lengths: list[int]) -> torch.Tensor:
    """[0, n_0, n_0 + n_1, ...] as int32, the keyword ``varlen_attention`` and flash attention read."""
    return torch.nn.functional.pad(torch.tensor(lengths, dtype=torch.int32).cumsum(0, dtype=torch.int32), (1, 0))


AttentionInterface.register(VARLEN, varlen_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(VARLEN, flash_attention_mask)
