"""The reward model inside a real Ray actor, batched, against the plain unbatched forward of the same weights."""

from __future__ import annotations

import pytest
import ray
import torch
from tiny_models import save_classifier
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from flywheel.rewards.reward_model import RewardModel

TEXTS = ["2+2=4", "The capital of France is Paris.", "x", "a much longer answer, which pads the others " * 3, "4=2+2"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    return str(save_classifier(tmp_path_factory.mktemp("reward-model")))


@pytest.fixture(scope="module")
def actor(model_path):
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    handle = ray.remote(RewardModel).options(num_cpus=1).remote(model_path, batch_size=4, threads=1)
    yield handle
    ray.kill(handle)
    if started:
        ray.shutdown()


def unbatched(model_path: str, texts: list[str]) -> list[float]:
    model = AutoModelForSequenceClassification.from_pretrained(model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    with torch.no_grad():
        return [model(input_ids=torch.tensor([tokenizer(t)["input_ids"]])).logits[0, 0].item() for t in texts]


def test_batched_scores_in_a_ray_actor_equal_the_unbatched_forward(actor, model_path):
    expected = unbatched(model_path, TEXTS)
    scores = ray.get(actor.score.remote(TEXTS))  # batches of 4 and 1, right-padded to different widths
    assert len(scores) == len(TEXTS)
    assert max(abs(a - b) for a, b in zip(scores, expected)) < 1e-5
    assert len({round(s, 6) for s in scores}) == len(TEXTS)  # different texts, different scores


def test_token_ids_score_like_their_text(actor, model_path):
    ids = AutoTokenizer.from_pretrained(model_path)(TEXTS[:2])["input_ids"]
    assert ray.get(actor.score_ids.remote(ids)) == pytest.approx(ray.get(actor.score.remote(TEXTS[:2])), abs=1e-6)


def test_a_sequence_ending_in_the_pad_token_is_one_clear_error(model_path):
    model = RewardModel(model_path)
    with pytest.raises(ValueError, match=f"^sequence 1 ends with the pad token id {model.pad_id}"):
        model.score_ids([[5, 6], [5, model.pad_id]])
