"""format_reward: the whole completion must have the shape, once."""

from flywheel.rewards.format import format_reward


def test_think_then_one_answer_passes():
    assert format_reward("<think>7*6 is 42\nso</think>\n<answer>42</answer>") == 1.0
    assert format_reward("  <think></think><answer>x</answer>\n") == 1.0


def test_missing_repeated_nested_or_trailing_parts_fail():
    assert format_reward("<answer>42</answer>") == 0.0  # no reasoning
    assert format_reward("<think>a</think><answer>1</answer><answer>2</answer>") == 0.0  # two answers
    assert format_reward("<think>a<think>b</think></think><answer>1</answer>") == 0.0  # nested tags
    assert format_reward("<think>a</think><answer>1</answer> and more") == 0.0  # text after
    assert format_reward("<think>a</think><answer>1<answer>2</answer>") == 0.0  # an answer inside the answer


def test_any_pattern():
    assert format_reward("ANSWER: 12", r"ANSWER: \d+") == 1.0
    assert format_reward("ANSWER: 12.", r"ANSWER: \d+") == 0.0
