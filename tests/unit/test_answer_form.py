r"""The math answer form: what a "simplified answer" may look like (exact strings, no math-verify)."""

import pytest

from flywheel.rewards.answer_form import boxed_answer, final_answer, simplest_number


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        (r"so \boxed{\frac{19}{12}}.", r"\frac{19}{12}"),
        (r"\boxed{1} then \boxed{ -\dfrac{1}{2} }", r" -\dfrac{1}{2} "),  # the last box
        (r"\fbox{7}", "7"),
        (r"\boxed{\frac{3}{4}+\frac{5}{6}", None),  # never closed
        ("no box: 19/12", None),
    ],
)
def test_boxed_answer_is_the_last_balanced_box(completion, answer):
    assert boxed_answer(completion) == answer


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        (r"$\boxed{\frac{19}{12}\,}$.", r"\frac{19}{12}"),
        (r"\boxed{ 19 / 12. }", "19/12"),
        (r"\(-\tfrac{1}{2}\)", r"-\tfrac{1}{2}"),  # no box: the whole reply
        ("The answer is 19/12", "Theansweris19/12"),
    ],
)
def test_final_answer_drops_spacing_and_delimiters(completion, answer):
    assert final_answer(completion) == answer


@pytest.mark.parametrize(
    "answer",
    [
        "7",
        "-12",
        "0",
        "0.5",
        "-1.25",
        ".5",
        "1.583333",
        "19/12",
        "-1/2",
        r"\frac{19}{12}",
        r"\dfrac{19}{12}",
        r"\tfrac{19}{12}",
        r"-\frac{1}{2}",
        r"\frac{-1}{2}",
    ],
)
def test_numbers_in_simplest_form_are_accepted(answer):
    assert simplest_number(answer)


@pytest.mark.parametrize(
    "answer",
    [
        r"\frac{3}{4}+\frac{5}{6}",  # the question restated
        "3/4+5/6",
        r"\frac{19}{12}\cdot1",
        "2*3",
        "2^2",
        r"\sqrt{4}",
        r"\frac{38}{24}",
        "4/2",
        r"\frac{3}{1}",
        "0/5",
        "1/0",  # not reduced, or no fraction at all
        r"1\frac{7}{12}",
        r"\frac{1}{-2}",
        r"-\frac{-1}{2}",
        "--1/2",
        r"\frac{19}{12}\approx1.58",
        "19/12or1",
        "x=19/12",
        "Theansweris19/12",
        r"\frac{1.5}{2}",
        "",
    ],
)
def test_everything_else_is_refused(answer):
    assert not simplest_number(answer)
