"""An episode's failure made in a rollout worker travels to the driver whole (pickled, as Ray sends it):
its reason and message, and its cause's type name and traceback, which errors/ records as if raised in
the driver. A judge on the run's own engines cannot be reached from the workers: refused at load."""

import pickle

from flywheel.monitor.faults import FaultLog
from flywheel.rewards.faults import RewardFault
from flywheel.rollout.group import EnvEpisode
from flywheel.types import Completion, RemoteFailure


def failing_episode(failure: BaseException) -> EnvEpisode:
    completion = Completion([5], [-0.1], "x", weight_versions=(0,))
    return EnvEpisode(
        [1], completion, 0.0, error="reward_error", turns=1, tool_calls=0, tool_errors=0, stop_reason="done", messages=(), failure=failure
    )


def grader(row):
    return 1 / row["zero"]


def test_a_failure_from_a_worker_keeps_its_reason_message_and_traceback(tmp_path):
    try:
        grader({"zero": 0})
    except ZeroDivisionError as error:
        failure = RewardFault("reward_error", "reward function grader raised ZeroDivisionError: division by zero")
        failure.__cause__ = error
    travelled = pickle.loads(pickle.dumps(RemoteFailure.of(failure)))
    assert (travelled.reason, str(travelled)) == ("reward_error", "reward function grader raised ZeroDivisionError: division by zero")

    log = FaultLog(tmp_path)
    assert log.record(failing_episode(travelled), step=3) == "reward_error-ZeroDivisionError"
    text = (tmp_path / "reward_error-ZeroDivisionError.txt").read_text()
    assert text.startswith("first seen at step 3: reward function grader raised ZeroDivisionError: division by zero\n")
    assert 'return 1 / row["zero"]' in text and "ZeroDivisionError: division by zero" in text
    assert log.record(failing_episode(travelled), step=4) is None  # a kind is written once
