"""The five answer-extraction rules of dataset tasks, on texts written the way models and datasets write them."""

import pytest

from flywheel.rewards.extraction import extract_answer

GSM8K = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n#### 72"


@pytest.mark.parametrize(
    ("text", "rule", "expected"),
    [
        (r"First \boxed{3}, then finally \boxed{\frac{1}{2}}.", "boxed", r"\frac{1}{2}"),  # the last box, braces balanced
        (r"\boxed{ 42 }", "boxed", "42"),
        ("no box here: 42", "boxed", None),
        (r"\boxed{never closed", "boxed", None),
        ("<answer>1</answer> wait, <answer>\n 2 \n</answer>", "tag", "2"),  # the last tag, across lines
        ("<answer>half open", "tag", None),
        ("It costs $1,250.50 after 3 days.", "last_number", "3"),
        ("Total: 1,250 dollars.", "last_number", "1250"),
        ("-7 degrees", "last_number", "-7"),
        ("no digits", "last_number", None),
        (GSM8K, "gsm8k", "72"),
        ("#### 1,000\n", "gsm8k", "1000"),
        ("#### 5 then\n#### 6", "gsm8k", "6"),
        ("#### 240 (10 h x $24/h)", "gsm8k", "240"),  # the first number of the line, not its last
        ("#### $3/4 of a pie", "gsm8k", "3/4"),
        ("#### none", "gsm8k", "none"),
        ("the answer is 72", "gsm8k", None),
        ("  72 \n", "whole", "72"),
        ("   ", "whole", None),
    ],
)
def test_rules(text, rule, expected):
    assert extract_answer(text, rule) == expected


def test_the_tag_is_configurable():
    assert extract_answer("<final>9</final> <answer>8</answer>", "tag", tag="final") == "9"


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown answer extraction 'first'"):
        extract_answer("1", "first")
