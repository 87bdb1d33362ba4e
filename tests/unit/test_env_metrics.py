"""episode_metrics: tool and turn statistics of a batch of environment episodes."""

from flywheel.rollout.group import EnvEpisode, episode_metrics
from flywheel.types import Completion


def episode(turns: int, calls: int, errors: int, reason: str = "done") -> EnvEpisode:
    completion = Completion([5], [-0.1], "", weight_versions=(0,), loss_mask=(1,))
    return EnvEpisode([1], completion, 0.0, turns=turns, tool_calls=calls, tool_errors=errors, stop_reason=reason, messages=())


def test_metrics_are_per_episode_means_and_the_error_share_of_all_calls():
    # 2 of 4 episodes call; calls 3 + 1 + 0 = 4 over 4 episodes; errors 1 + 1 = 2 of 4 calls; turns (3 + 2 + 1 + 2) / 4; one timed out
    episodes = [episode(3, 3, 1), episode(2, 1, 1), episode(1, 0, 0), episode(2, 0, 0, "time_limit")]
    assert episode_metrics(episodes) == {
        "tools/call_rate": 0.5,
        "tools/calls_per_episode": 1.0,
        "tools/error_rate": 0.5,
        "env/turns_mean": 2.0,
        "env/time_limit_frac": 0.25,
    }


def test_no_calls_means_no_errors():
    assert episode_metrics([episode(1, 0, 0)])["tools/error_rate"] == 0.0


def test_an_environment_without_tools_reports_no_tool_metrics():
    assert set(episode_metrics([episode(1, 0, 0)], tools=False)) == {"env/turns_mean", "env/time_limit_frac"}
