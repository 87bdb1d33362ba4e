"""``collate`` (one flat C array a column, scattered at once) equals the padded batch written row by row, bit for
bit: prompts and completions of every length (empty ones too), multi-turn loss masks, environment tokens without a
weight version, completions without versions."""

import random

import torch

from flywheel.types import Completion, Episode, collate


def row_by_row(episodes: list[Episode], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(e.prompt_ids) + len(e.completion.token_ids) for e in episodes)
    out = {
        "tokens": torch.full((len(episodes), width), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros((len(episodes), width), dtype=torch.long),
        "loss_mask": torch.zeros((len(episodes), width)),
        "behaviour_logprobs": torch.zeros((len(episodes), width)),
        "weight_versions": torch.full((len(episodes), width), -1, dtype=torch.long),
    }
    for i, e in enumerate(episodes):
        c, start = e.completion, len(e.prompt_ids)
        end = start + len(c.token_ids)
        out["tokens"][i, :end] = torch.tensor(e.prompt_ids + c.token_ids, dtype=torch.long)
        out["attention_mask"][i, :end] = 1
        out["loss_mask"][i, start:end] = torch.tensor(c.loss_mask if c.loss_mask is not None else [1.0] * len(c.token_ids), dtype=torch.float)
        out["behaviour_logprobs"][i, start:end] = torch.tensor(c.logprobs, dtype=torch.float)
        if c.weight_versions:
            out["weight_versions"][i, start:end] = torch.tensor([-1 if v is None else v for v in c.weight_versions], dtype=torch.long)
    return out


def random_episode(rng: random.Random) -> Episode:
    prompt = [rng.randrange(100) for _ in range(rng.randrange(1, 9))]
    n = rng.choice([0, 1, rng.randrange(2, 40)])
    ids, logprobs = [rng.randrange(100) for _ in range(n)], [-rng.random() * 7 for _ in range(n)]
    kind = rng.randrange(3)
    mask = tuple(rng.randrange(2) for _ in range(n)) if kind == 0 else None
    versions = tuple(None if mask is not None and not m else rng.randrange(5) for m in (mask or [1] * n)) if kind != 2 or n == 0 else ()
    return Episode(prompt, Completion(ids, logprobs, "", versions, loss_mask=mask), 0.0)


def test_collate_equals_the_batch_written_row_by_row():
    rng = random.Random(0)
    for _ in range(50):
        episodes = [random_episode(rng) for _ in range(rng.randrange(1, 12))]
        batch, want = collate(episodes, pad_id=7), row_by_row(episodes, pad_id=7)
        for name, expected in want.items():
            got = getattr(batch, name)
            assert got.dtype == expected.dtype and torch.equal(got, expected), name
        assert torch.equal(batch.advantages, torch.zeros_like(want["loss_mask"]))
