from flywheel.envs.arithmetic import make_splits
from flywheel.rewards.exact import exact_match_reward
from flywheel.rollout.stream import prompt_indices


def test_splits_are_deterministic_disjoint_and_correct():
    train, held_out = make_splits(seed=0, digits=3, train_size=300, eval_size=200)
    again, _ = make_splits(seed=0, digits=3, train_size=300, eval_size=200)
    assert train == again
    assert not {p.prompt for p in train} & {p.prompt for p in held_out}
    assert len({p.prompt for p in train}) == 300
    for p in train + held_out:
        a, b = p.prompt.rstrip("=").split("+")
        assert int(p.answer) == int(a) + int(b)


def test_exact_match_reward():
    assert exact_match_reward("579", "579") == 1.0
    assert exact_match_reward(" 579 ", "579") == 1.0
    assert exact_match_reward("5790", "579") == 0.0
    assert exact_match_reward("", "579") == 0.0


def test_prompt_indices_cover_each_epoch_once():
    # 10 problems drawn 4 at a time: positions 0-7, then 8-11 = the last 2 of epoch 0 and 2 of epoch 1.
    first_epoch = prompt_indices(10, 0, 4, seed=3) + prompt_indices(10, 4, 4, seed=3) + prompt_indices(10, 8, 4, seed=3)[:2]
    assert sorted(first_epoch) == list(range(10))
    assert prompt_indices(10, 8, 4, seed=3)[2:] == prompt_indices(10, 10, 2, seed=3)
    assert prompt_indices(10, 8, 4, seed=3) == prompt_indices(10, 8, 4, seed=3)
