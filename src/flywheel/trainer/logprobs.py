"""The one place where the policy's token log-probabilities and entropies are computed."""

import torch


def token_logprobs(model: torch.nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor | None, with_entropy: bool = False):
    """log p(tokens[:, t] | tokens[:, :t]) as [B, T] (position 0 is 0), and the entropy there if asked.

    Computed in float32 from the full-vocabulary logits, as vLLM reports raw logprobs.
    """
    logits = model(input_ids=tokens, attention_mask=attention_mask).logits[:, :-1].float()
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all.gather(-1, tokens[:, 1:, None]).squeeze(-1)
    logprobs = torch.nn.functional.pad(picked, (1, 0))
    if not with_entropy:
        return logprobs
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logprobs, torch.nn.functional.pad(entropy, (1, 0))
