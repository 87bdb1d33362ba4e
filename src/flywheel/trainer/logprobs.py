"""The one place where the policy's token log-probabilities and entropies (and the critic's values)
are computed from a model's forward pass, padded or packed."""

import torch

from flywheel.trainer.packing import Packed


def _predicting(model: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor | None, packed: bool):
    """The model's outputs at every position that predicts a next token, the tokens they predict, and
    the function that lays per-position values out as [B, T] (position t holds the value about
    tokens[:, t]; position 0 and padding are 0). ``packed``: one forward over the rows laid end to
    end, without padding."""
    if packed:
        rows = Packed.of(tokens, attention_mask)
        width = tokens.shape[1]
        return model(**rows.model_inputs()).logits[0], rows.next_tokens(), lambda values: rows.next_token_view(values, width)
    return model(input_ids=tokens, attention_mask=attention_mask).logits[:, :-1], tokens[:, 1:], _after_first_position


def _after_first_position(values: torch.Tensor) -> torch.Tensor:
    """[B, T - 1] values about tokens 1.. -> [B, T] with 0 at position 0."""
    return torch.nn.functional.pad(values, (1, 0))


def token_logprobs(
    model: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor | None, with_entropy: bool = False, packed: bool = False
):
    """log p(tokens[:, t] | tokens[:, :t]) as [B, T] (position 0 and padding are 0), and the entropy
    there if asked.

    Computed in float32 from the full-vocabulary logits (whatever the compute dtype), as vLLM
    reports raw logprobs.
    """
    logits, following, layout = _predicting(model, tokens, attention_mask, packed)
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logprobs = layout(logp_all.gather(-1, following[..., None]).squeeze(-1))
    if not with_entropy:
        return logprobs
    return logprobs, layout(-(logp_all.exp() * logp_all).sum(-1))


def token_values(critic: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor, packed: bool = False) -> torch.Tensor:
    """Critic value of each state, aligned like logprobs: [:, t] is V(tokens[:, :t]), [:, 0] = 0; float32."""
    out, _, layout = _predicting(critic, tokens, attention_mask, packed)
    return layout(out[..., 0].float())
