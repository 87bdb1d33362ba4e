"""The loop's two named tasks (controller.until_first_failure): a failure of either is raised, and a
producer that fails first cancels the training side."""

import asyncio

import pytest

from flywheel.controller import until_first_failure


async def forever() -> None:
    await asyncio.Event().wait()


async def fail(after_s: float, error: Exception) -> None:
    await asyncio.sleep(after_s)
    raise error


def test_a_failing_producer_cancels_the_training_side_and_is_raised():
    async def main() -> asyncio.Task:
        producer = asyncio.create_task(fail(0.01, ValueError("engine gone")), name="rollout-admission")
        trainer = asyncio.create_task(forever(), name="train-steps")
        with pytest.raises(ValueError, match="engine gone"):
            await until_first_failure(producer, trainer)
        return trainer

    assert asyncio.run(main()).cancelled()


def test_a_failing_training_side_is_raised_and_the_producer_left_to_close():
    async def main() -> asyncio.Task:
        producer = asyncio.create_task(forever(), name="rollout-admission")
        trainer = asyncio.create_task(fail(0.01, RuntimeError("rank died")), name="train-steps")
        with pytest.raises(RuntimeError, match="rank died"):
            await until_first_failure(producer, trainer)
        running = not producer.done()
        producer.cancel()
        return running

    assert asyncio.run(main())


def test_a_training_side_that_ends_returns():
    async def main() -> None:
        producer = asyncio.create_task(forever(), name="rollout-admission")
        await until_first_failure(producer, asyncio.create_task(asyncio.sleep(0.01), name="train-steps"))
        producer.cancel()

    asyncio.run(main())
