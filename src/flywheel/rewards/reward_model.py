"""A Hugging Face sequence-classification reward model, scored in batches; run it as a Ray actor with
``ray.remote(RewardModel)``."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class RewardModel:
    """One float per text (or token-id sequence): the one-label classifier's logit at the last real token.

    Batches are right-padded with the model's pad token and carry an attention mask; Hugging Face pools the last
    token that is not the pad token, so a sequence may not end with the pad token id (checked). Texts longer than
    `max_length` tokens keep their end (the pooled token)."""

    def __init__(
        self, path: str, *, batch_size: int = 16, max_length: int = 2048, dtype: str = "float32",
        threads: int | None = None,
    ):  # fmt: skip
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(threads)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
        if self.model.config.num_labels != 1:
            raise ValueError(f"reward model '{path}' has {self.model.config.num_labels} labels; a reward model has 1")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.pad_id = self.model.config.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.model.config.pad_token_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            raise ValueError(f"reward model '{path}' defines no pad token; set pad_token_id in its config.json")
        self.tokenizer.truncation_side = "left"
        self.batch_size, self.max_length = batch_size, max_length

    def score(self, texts: Sequence[str]) -> list[float]:
        """Tokenizes each text (with the tokenizer's own special tokens) and scores it."""
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return self.score_ids(ids)

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> list[float]:
        """Scores token-id sequences, `batch_size` at a time."""
        for i, seq in enumerate(sequences):
            if not seq:
                raise ValueError(f"sequence {i} is empty; a reward model needs at least one token")
            if seq[-1] == self.pad_id:
                raise ValueError(f"sequence {i} ends with the pad token id {self.pad_id}, which pooling would skip")
        scores: list[float] = []
        for start in range(0, len(sequences), self.batch_size):
            scores += self._forward(sequences[start : start + self.batch_size])
        return scores

    @torch.no_grad()
    def _forward(self, batch: Sequence[Sequence[int]]) -> list[float]:
        width = max(map(len, batch))
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1
        return self.model(input_ids=ids, attention_mask=mask).logits[:, 0].float().tolist()
