"""Generation calls made in the same turn of the event loop reach the engine actor as one Ray call, and
each caller gets its own result, or its own error, as if it had called alone."""

import asyncio

import pytest
from transformers import AutoTokenizer

from flywheel.envs.arithmetic import make_splits


def test_calls_made_together_travel_as_one_batch_and_each_caller_gets_its_own_result(shared_engine, config):
    tokenizer = AutoTokenizer.from_pretrained(config.model.path)
    prompts = [tokenizer.encode(p.prompt) for p in make_splits(11, 2, 6, 1)[0]]
    too_long = prompts[0] * 40  # longer than the model's context: vLLM refuses this one request
    calls = [(prompt, 4, 1.0, 8, 100 + i) for i, prompt in enumerate(prompts)]

    async def together():
        sent = shared_engine.batches_sent
        results = await asyncio.gather(
            *(shared_engine.generate([prompt], n, t, m, seed) for prompt, n, t, m, seed in calls),
            shared_engine.generate([too_long], 4, 1.0, 8, 0),
            return_exceptions=True,
        )
        return results, shared_engine.batches_sent - sent

    async def alone():
        return [await shared_engine.generate([prompt], n, t, m, seed) for prompt, n, t, m, seed in calls]

    (*results, refused), batches = asyncio.run(together())
    assert batches == 1
    assert isinstance(refused, Exception) and "maximum context length is 64" in str(refused), refused
    for got, expected in zip(results, asyncio.run(alone()), strict=True):
        assert [c.token_ids for c in got[0]] == [c.token_ids for c in expected[0]]
        for mine, theirs in zip(got[0], expected[0]):
            assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
        assert all(len(c.weight_versions) == len(c.token_ids) for c in got[0])


def test_the_engine_actor_keeps_its_startup_heap_out_of_garbage_collection(shared_engine):
    """vLLM's front end holds hundreds of thousands of objects after startup; a full collection that walked
    them all would stall the actor's event loop (0.4 s in bench/gc_pause.py). Frozen, a collection walks only
    what was allocated since."""
    import gc

    import ray

    frozen, walked = ray.get(shared_engine.actor.__ray_call__.remote(lambda _: (gc.get_freeze_count(), len(gc.get_objects()))))
    assert frozen > 100_000 and walked < frozen / 10
