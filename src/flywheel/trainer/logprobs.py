"""The one place where the policy's token log-probabilities and entropies (and the critic's values)
are computed from a model's forward pass, padded or packed."""

import torch

from flywheel.trainer.packing import Packed


def token_logprobs(
    model: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor | None, with_entropy: bool = False, packed: bool = False
):
    """log p(tokens[:, t] | tokens[:, :t]) as [B, T] (position 0 and padding are 0), and the entropy
    there if asked. ``packed``: one forward over the rows laid end to end, without padding.

    Computed in float32 from the full-vocabulary logits (whatever the compute dtype), as vLLM
    reports raw logprobs.
    """
    if packed:
        rows = Packed.of(tokens, attention_mask)
        logits = model(**rows.model_inputs()).logits[0].float()
        following = rows.next_tokens()
        unpack = lambda per_position: rows.next_token_view(per_position, tokens.shape[1])  # noqa: E731
    else:
        logits = model(input_ids=tokens, attention_mask=attention_mask).logits[:, :-1].float()
        following = tokens[:, 1:]
        unpack = lambda per_position: torch.nn.functional.pad(per_position, (1, 0))  # noqa: E731
    logp_all = torch.log_softmax(logits, dim=-1)
    logprobs = unpack(logp_all.gather(-1, following[..., None]).squeeze(-1))
    if not with_entropy:
        return logprobs
    return logprobs, unpack(-(logp_all.exp() * logp_all).sum(-1))


def token_values(critic: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor, packed: bool = False) -> torch.Tensor:
    """Critic value of each state, aligned like logprobs: [:, t] is V(tokens[:, :t]), [:, 0] = 0; float32."""
    if packed:
        rows = Packed.of(tokens, attention_mask)
        out = critic(**rows.model_inputs()).logits[0, :, 0].float()
        return rows.next_token_view(out, tokens.shape[1])
    out = critic(input_ids=tokens, attention_mask=attention_mask).logits[:, :-1, 0].float()
    return torch.nn.functional.pad(out, (1, 0))
