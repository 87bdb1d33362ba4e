"""The core split of an asynchronous run on one CPU machine (cluster/cores.py)."""

from pathlib import Path

import pytest

from flywheel.cluster.cores import as_cpu_list, halves, split_for_async
from flywheel.config import load_config

REPO = Path(__file__).resolve().parents[2]


def quickstart(*overrides: str):
    return load_config(REPO / "configs/quickstart.yaml", list(overrides))


def test_halves_give_the_engines_the_first_half_rounded_up():
    assert halves([1, 0]) == ([0], [1])
    assert halves([4, 5, 6]) == ([4, 5], [6])
    assert halves(range(8)) == ([0, 1, 2, 3], [4, 5, 6, 7])
    assert halves([3]) == ([3], [])


def test_cpu_lists_join_runs_of_cores():
    assert as_cpu_list([0]) == "0"
    assert as_cpu_list([5, 0, 1, 2]) == "0-2,5"
    assert as_cpu_list([1, 3, 4, 7]) == "1,3-4,7"


def test_the_shipped_quickstart_splits_two_cores():
    config, note = split_for_async(quickstart(), [0, 1], gpu=False)
    assert config.engine.cpu_bind == "0" and config.trainer.cpu_affinity == [1] and config.trainer.threads == 1
    assert note is not None and "engines on cores 0, trainer on cores 1" in note
    assert config.rollout == quickstart().rollout and config.algorithm == quickstart().algorithm  # nothing else moves


def test_trainer_threads_are_shared_among_its_ranks_and_never_raised():
    config, _ = split_for_async(quickstart("trainer.ranks=2", "trainer.threads=8"), range(8), gpu=False)
    assert config.engine.cpu_bind == "0-3" and config.trainer.cpu_affinity == [4, 5, 6, 7] and config.trainer.threads == 2
    config, _ = split_for_async(quickstart("trainer.threads=1"), range(8), gpu=False)
    assert config.trainer.threads == 1


@pytest.mark.parametrize(
    "overrides, cores, gpu",
    [
        (["rollout.max_staleness=0"], [0, 1], False),  # synchronous: each side has every core while the other waits
        (["engine.cpu_bind='0-1'"], [0, 1], False),  # chosen by hand
        (["trainer.cpu_affinity=[0]"], [0, 1], False),
        (["cluster.address=127.0.0.1:6379"], [0, 1], False),  # the workers live elsewhere
        ([], [0, 1], True),
        ([], [0], False),  # one core: nothing to split
        (["trainer.ranks=2"], [0, 1], False),  # two ranks on one core
        (["rollout.engines=2"], range(8), False),  # one cpu_bind for both replicas: they would share the half
        (["eval.engines=1"], range(8), False),
    ],
)
def test_no_split_where_it_is_not_asked_for_or_does_not_fit(overrides, cores, gpu):
    config = quickstart(*overrides)
    assert split_for_async(config, cores, gpu) == (config, None)
