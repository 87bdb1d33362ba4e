"""Writes assets/word-problems/{train,test}.jsonl: grade-school word problems in GSM8K's format.

Each line is {"question": ..., "answer": ...}; the answer is the worked solution, one step a line with
the calculation annotated as <<expression=value>>, and a last line "#### N" with the integer result.
Eight problem templates with random names, items and numbers (chosen so that every intermediate
value is a whole number); problems are distinct, and no test question is a train question.
Seeded and deterministic: the same command writes the same bytes.

    python assets/make_word_problems.py            # --seed 0 --train 400 --test 100
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

NAMES = ["Ava", "Ben", "Carla", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jamal", "Kira", "Leo", "Maya", "Noah", "Olga", "Pablo"]
ITEMS = ["apples", "stickers", "pencils", "marbles", "cookies", "stamps", "shells", "cards"]
THINGS = ["bike", "tablet", "guitar", "tent", "telescope", "skateboard"]

Problem = tuple[str, list[str], int]


def calc(expression: str, value: int, text: str) -> str:
    """One worked step: the text around an annotated calculation, GSM8K style."""
    return text.format(f"{expression} = <<{expression.replace(' ', '')}={value}>>{value}")


def sold_half(rng: random.Random) -> Problem:
    name, item, april = rng.choice(NAMES), rng.choice(ITEMS), 2 * rng.randint(6, 60)
    may = april // 2
    question = (
        f"{name} sold {april} {item} in April, and then sold half as many {item} in May. How many {item} did {name} sell altogether in April and May?"
    )
    steps = [
        calc(f"{april} / 2", may, f"{name} sold {{}} {item} in May."),
        calc(f"{april} + {may}", april + may, f"{name} sold {{}} {item} in April and May."),
    ]
    return question, steps, april + may


def wages(rng: random.Random) -> Problem:
    name, rate, monday, tuesday = rng.choice(NAMES), rng.randint(8, 25), rng.randint(2, 8), rng.randint(2, 8)
    question = f"{name} earns ${rate} an hour walking dogs. {name} walked dogs for {monday} hours on Monday and {tuesday} hours on Tuesday. How many dollars did {name} earn?"
    hours = monday + tuesday
    steps = [
        calc(f"{monday} + {tuesday}", hours, f"{name} worked {{}} hours."),
        calc(f"{hours} * {rate}", hours * rate, f"{name} earned {{}} dollars."),
    ]
    return question, steps, hours * rate


def saving(rng: random.Random) -> Problem:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    saved, parents = 5 * rng.randint(4, 30), 5 * rng.randint(2, 10)
    grandparents = 2 * parents
    price = saved + parents + grandparents + 5 * rng.randint(1, 20)
    question = (
        f"{name} wants a {thing} that costs ${price}. {name} has saved ${saved}. {name}'s parents give ${parents}, and {name}'s grandparents give "
        f"twice as much as the parents. How many more dollars does {name} need?"
    )
    have = saved + parents + grandparents
    steps = [
        calc(f"{parents} * 2", grandparents, "The grandparents give {} dollars."),
        calc(f"{saved} + {parents} + {grandparents}", have, f"{name} has {{}} dollars."),
        calc(f"{price} - {have}", price - have, f"{name} needs {{}} more dollars."),
    ]
    return question, steps, price - have


def reading(rng: random.Random) -> Problem:
    name, yesterday = rng.choice(NAMES), rng.randint(5, 30)
    today = 2 * yesterday
    left = 2 * rng.randint(10, 80)
    pages = yesterday + today + left
    question = (
        f"{name} is reading a {pages}-page book. Yesterday {name} read {yesterday} pages, and today twice as many pages as yesterday. "
        f"If {name} wants to read half of the remaining pages tomorrow, how many pages should {name} read tomorrow?"
    )
    steps = [
        calc(f"{yesterday} * 2", today, f"Today {name} read {{}} pages."),
        calc(f"{yesterday} + {today}", yesterday + today, f"So far {name} has read {{}} pages."),
        calc(f"{pages} - {yesterday + today}", left, "There are {} pages left."),
        calc(f"{left} / 2", left // 2, f"{name} should read {{}} pages tomorrow."),
    ]
    return question, steps, left // 2


def boxes(rng: random.Random) -> Problem:
    name, item, count, each = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(2, 12), rng.randint(4, 24)
    total = count * each
    given = rng.randint(1, total - 1)
    question = (
        f"{name} buys {count} boxes of {item}. Each box holds {each} {item}. {name} gives away {given} {item}. How many {item} does {name} have left?"
    )
    steps = [
        calc(f"{count} * {each}", total, f"{name} bought {{}} {item}."),
        calc(f"{total} - {given}", total - given, f"{name} has {{}} {item} left."),
    ]
    return question, steps, total - given


def discount(rng: random.Random) -> Problem:
    thing, percent = rng.choice(THINGS), rng.choice([10, 20, 25, 50])
    price = 20 * rng.randint(3, 40)
    off = price * percent // 100
    question = f"A {thing} costs ${price}. This week it is {percent}% off. How many dollars does the {thing} cost this week?"
    steps = [
        calc(f"{price} * {percent} / 100", off, "The discount is {} dollars."),
        calc(f"{price} - {off}", price - off, f"The {thing} costs {{}} dollars."),
    ]
    return question, steps, price - off


def travel(rng: random.Random) -> Problem:
    speed, hours, speed2, hours2 = 5 * rng.randint(6, 16), rng.randint(1, 5), 5 * rng.randint(6, 16), rng.randint(1, 5)
    first, second = speed * hours, speed2 * hours2
    question = f"A train travels at {speed} miles per hour for {hours} hours, then at {speed2} miles per hour for {hours2} hours. How many miles does it travel in total?"
    steps = [
        calc(f"{speed} * {hours}", first, "First it travels {} miles."),
        calc(f"{speed2} * {hours2}", second, "Then it travels {} miles."),
        calc(f"{first} + {second}", first + second, "In total it travels {} miles."),
    ]
    return question, steps, first + second


def sharing(rng: random.Random) -> Problem:
    name, item, friends, each = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(2, 8), rng.randint(3, 15)
    total = friends * each
    more = rng.randint(1, total - 1)
    start = total - more
    question = f"{name} has {start} {item} and gets {more} more. {name} shares all of them equally among {friends} friends. How many {item} does each friend get?"
    steps = [calc(f"{start} + {more}", total, f"{name} has {{}} {item}."), calc(f"{total} / {friends}", each, "Each friend gets {} " + item + ".")]
    return question, steps, each


TEMPLATES: list[Callable[[random.Random], Problem]] = [sold_half, wages, saving, reading, boxes, discount, travel, sharing]


def problems(seed: int, count: int) -> list[dict[str, str]]:
    """``count`` distinct problems, round-robin over the templates."""
    rng, seen, rows = random.Random(seed), set(), []
    while len(rows) < count:
        question, steps, answer = TEMPLATES[len(rows) % len(TEMPLATES)](rng)
        if question not in seen:
            seen.add(question)
            rows.append({"question": question, "answer": "\n".join(steps) + f"\n#### {answer}"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "word-problems")
    args = parser.parse_args()
    rows = problems(args.seed, args.train + args.test)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", rows[: args.train]), ("test", rows[args.train :])):
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in part))
        print(f"{args.out / name}.jsonl: {len(part)} problems")


if __name__ == "__main__":
    main()
