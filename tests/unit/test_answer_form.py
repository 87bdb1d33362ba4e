r"""The math answer form: what a "simplified answer" may look like (exact strings, no math-verify)."""

import pytest

from flywheel.rewards.answer_form import boxed_answer, canonical, final_answer, number_value, simplest_number


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


@pytest.mark.parametrize(
    ("written", "read", "value"),
    [
        ("\u221212", "-12", -12.0),  # a Unicode minus sign
        (r"\frac1{33}", r"\frac{1}{33}", 1 / 33),
        (r"\dfrac12", r"\dfrac{1}{2}", 0.5),
        (r"\displaystyle\frac{3}{4}", r"\frac{3}{4}", 0.75),
        (r"\mathbf{42}", "42", 42.0),
        (r"\left(\frac{1}{2}\right)", r"\frac{1}{2}", 0.5),
        (r"0.\overline{3}", "1/3", 1 / 3),
        ("0.(142857)", "1/7", 1 / 7),
        (r"-0.1\dot{6}", "-1/6", -1 / 6),
        (r"0.\bar{9}", "1", 1.0),
        ("1,000", "1000", 1000.0),
        ("1{,}250.5", "1250.5", 1250.5),
        (r"18\text{ dollars}", "18", 18.0),
        (r"50\%", "50", 50.0),
        (r"45^\circ", "45", 45.0),
        (r"\$2.50", "2.50", 2.5),
        (r"\frac{-1}{2}", r"\frac{-1}{2}", -0.5),
    ],
)
def test_honest_notation_is_read_as_the_number_it_writes(written, read, value):
    assert canonical(written) == read and number_value(read) == pytest.approx(value)


@pytest.mark.parametrize("written", ["1,2", "1,2345", r"5\text{ or }6", r"(1)(2)", r"\frac{1}{2}\text{ or }3", r"24\approx24.0"])
def test_notation_that_is_not_one_number_stays_refused(written):
    assert number_value(canonical(written)) is None
