"""Micro-batches cut by a token budget, and sequence packing: the rows of a micro-batch laid end to
end in one row without padding, position ids restarting at 0 for each sequence (from which
transformers builds a block-causal mask: attention never crosses sequences), and per-token outputs
unpacked back to the padded [B, T] layout the losses use."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flywheel.trainer.attention import cu_seq_lens


def plan_microbatches(lengths: list[int], budget: int) -> list[list[int]]:
    """Row indices of micro-batches of at most ``budget`` tokens each (first fit, longest rows
    first; a row longer than the budget gets a micro-batch of its own). Each list is in row order."""
    bins: list[list[int]] = []
    room: list[int] = []
    for row in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fits = next((b for b, space in enumerate(room) if lengths[row] <= space), None)
        if fits is None:
            bins.append([])
            room.append(budget)
            fits = len(bins) - 1
        bins[fits].append(row)
        room[fits] -= lengths[row]
    return [sorted(b) for b in bins]


@dataclass(frozen=True)
class Packed:
    """Rows laid end to end: ``input_ids`` and ``position_ids`` [1, L] with L = sum(lengths)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    lengths: list[int]

    @classmethod
    def of(cls, tokens: torch.Tensor, attention_mask: torch.Tensor) -> Packed:
        """tokens, attention_mask [B, T] (right-padded) -> the B sequences packed."""
        real = attention_mask.bool()
        positions = attention_mask.cumsum(dim=1) - 1
        return cls(tokens[real][None], positions[real][None], attention_mask.sum(dim=1).tolist())

    def model_inputs(self) -> dict[str, torch.Tensor | int]:
        """Keyword arguments of a transformers forward over the packed rows (the sequence boundaries
        for ``attention.varlen_attention`` and flash attention)."""
        cu = cu_seq_lens(self.lengths).to(self.input_ids.device)
        longest = max(self.lengths)
        return {
            "input_ids": self.input_ids,
            "position_ids": self.position_ids,
            "cu_seq_lens_q": cu,
            "cu_seq_lens_k": cu,
            "max_length_q": longest,
            "max_length_k": longest,
        }

    def next_token_view(self, per_position: torch.Tensor, width: int) -> torch.Tensor:
        """[L] values computed at each packed position (about the token that follows it) -> [B, width]
        where [b, t] is the value at sequence b's position t - 1 (and 0 at t = 0 and on padding),
        the layout of ``token_logprobs``."""
        lengths = torch.tensor(self.lengths)
        starts = lengths.cumsum(0) - lengths
        t = torch.arange(width)
        inside = (t >= 1) & (t < lengths[:, None])
        index = (starts[:, None] + t - 1).clamp(0, per_position.shape[0] - 1)
        return torch.where(inside, per_position[index], per_position.new_zeros(()))

    def next_tokens(self) -> torch.Tensor:
        """[L] the token each packed position predicts (the sequence's next token; 0 at its last position)."""
        ids = self.input_ids[0]
        following = torch.cat([ids[1:], ids.new_zeros(1)])
        following[torch.tensor(self.lengths).cumsum(0) - 1] = 0
        return following
