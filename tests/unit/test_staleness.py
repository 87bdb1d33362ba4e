"""The staleness gate (admission) and the staleness check (consumption), exactly."""

from flywheel.rollout.stream import admission_room, too_stale


def test_synchronous_gate_admits_exactly_one_batch_per_version():
    # max_staleness 0, batch 4: at version v, accepted groups v*4 (all trained) -> room for 4 more
    assert admission_room(accepted=0, running=0, version=0, max_staleness=0, batch_size=4) == 4
    assert admission_room(accepted=2, running=2, version=0, max_staleness=0, batch_size=4) == 0
    assert admission_room(accepted=4, running=0, version=0, max_staleness=0, batch_size=4) == 0  # wait for version 1
    assert admission_room(accepted=4, running=0, version=1, max_staleness=0, batch_size=4) == 4


def test_gate_with_staleness_two_runs_three_batches_ahead():
    assert admission_room(accepted=0, running=0, version=0, max_staleness=2, batch_size=4) == 12
    assert admission_room(accepted=5, running=7, version=0, max_staleness=2, batch_size=4) == 0
    assert admission_room(accepted=5, running=7, version=1, max_staleness=2, batch_size=4) == 4
    # a dropped group leaves accepted: its place is given back
    assert admission_room(accepted=4, running=7, version=0, max_staleness=2, batch_size=4) == 1


def test_too_stale_counts_versions_behind_the_trainer():
    assert not too_stale(oldest_version=3, trainer_version=3, max_staleness=0)
    assert too_stale(oldest_version=2, trainer_version=3, max_staleness=0)
    assert not too_stale(oldest_version=1, trainer_version=3, max_staleness=2)
    assert too_stale(oldest_version=0, trainer_version=3, max_staleness=2)
