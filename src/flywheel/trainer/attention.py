"""Variable-length attention for packed sequences on any device: a transformers attention
implementation (``VARLEN``) that runs causal SDPA per sequence, batching sequences of equal length
together, so a packed micro-batch costs sum(n_i^2), not (sum n_i)^2 as a block-diagonal mask would.
Sequences are split off as views and joined with one concatenation (no index scatter, whose
backward would zero and fill a full-size tensor per distinct length).
Sequence boundaries come from ``cu_seq_lens_q`` (the flash-attention keyword transformers forwards to
attention functions); without it each row is one sequence (right padding never reaches a real token
under a causal mask). On GPU with flash-attn installed, "flash_attention_2" does the same natively.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

VARLEN = "flywheel_varlen"


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, H, L, D], key and value [B, H_kv, L, D] -> ([B, L, H, D], None), causal within each sequence."""
    gqa = query.shape[1] != key.shape[1]
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling, enable_gqa=gqa)
        return out.transpose(1, 2), None
    lengths = cu.diff().tolist()
    per_sequence = [x[0].transpose(0, 1).split(lengths) for x in (query, key, value)]  # views [n, H, D]
    out: list[torch.Tensor] = [None] * len(lengths)
    by_length: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by_length.setdefault(n, []).append(i)
    for rows in by_length.values():
        q, k, v = (torch.stack([x[i] for i in rows]).transpose(1, 2) for x in per_sequence)  # [rows, H, n, D]
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=gqa).transpose(1, 2)
        for i, piece in zip(rows, o.unbind(0)):  # unbind: one backward for all pieces (indexing one by one would zero-fill o per row)
            out[i] = piece
    return torch.cat(out)[None], None


def cu_seq_lens(lengths: list[int]) -> torch.Tensor:
    """[0, n_0, n_0 + n_1, ...] as int32, the keyword ``varlen_attention`` and flash attention read."""
    return torch.nn.functional.pad(torch.tensor(lengths, dtype=torch.int32).cumsum(0, dtype=torch.int32), (1, 0))


AttentionInterface.register(VARLEN, varlen_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(VARLEN, flash_attention_mask)
