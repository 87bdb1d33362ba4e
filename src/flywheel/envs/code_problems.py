"""The ``python_code`` problem bank: each problem is a statement, a reference solution and an input generator.

Hidden cases are drawn per task from a seed: the generator makes the arguments (random values, with
edge values such as empty lists, zero and extremes drawn often enough to appear) and the reference
solution, trusted code run on the host, computes each expected value. A table of any fixed cases
therefore cannot pay: the next task of the same problem asks about other inputs.

Reference solutions are module-level functions named as the task asks, self-contained (builtins only),
never mutating their arguments, returning JSON data (int, str, bool, lists): their source, sent as a
completion, must score 1.0 (tested).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Args = tuple[Any, ...]


@dataclass(frozen=True)
class Problem:
    """One function to write: ``signature`` and ``statement`` make the prompt; ``solve`` is the reference."""

    signature: str  # e.g. "add(a, b)"
    statement: str  # what it returns, precise enough that the reference is the only reading
    solve: Callable[..., Any]
    inputs: Callable[[random.Random], Args]  # one argument tuple

    @property
    def name(self) -> str:
        return self.solve.__name__

    def cases(self, rng: random.Random, count: int) -> list[tuple[Args, Any]]:
        """``count`` (args, expected) pairs: arguments from the generator, expectations from the reference."""
        return [(args, self.solve(*args)) for args in (self.inputs(rng) for _ in range(count))]


# Generators: edge values (bounds, zero, empty, one element) come up about one draw in ten.


def _int(rng: random.Random, lo: int, hi: int) -> int:
    return rng.choice([lo, hi, min(max(0, lo), hi)]) if rng.random() < 0.1 else rng.randint(lo, hi)


def _ints(rng: random.Random, lo: int, hi: int, longest: int = 12, shortest: int = 0) -> list[int]:
    n = rng.choice([shortest, shortest + 1]) if rng.random() < 0.1 else rng.randint(shortest, longest)
    return [rng.randint(lo, hi) for _ in range(n)]


def _text(rng: random.Random, alphabet: str, longest: int = 16) -> str:
    n = rng.choice([0, 1]) if rng.random() < 0.1 else rng.randint(2, longest)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _count(rng: random.Random, most: int) -> int:
    return 0 if rng.random() < 0.05 else rng.randint(1, most)


def _palindrome_or_not(rng: random.Random) -> str:
    half = _text(rng, "abc", 6)
    return half + rng.choice(["", "a", "b"]) + half[::-1] if rng.random() < 0.5 else _text(rng, "abc", 8)


def _sentence(rng: random.Random) -> str:
    words = [_text(rng, string.ascii_letters, 6) or "x" for _ in range(rng.randint(0, 6))]
    return "".join(rng.choice([" ", "  ", "\t"]) + w for w in words) + rng.choice(["", " "])


def _prime_or_not(rng: random.Random) -> int:
    n = _int(rng, 0, 10**5)
    while rng.random() < 0.5 and not is_prime(n):  # about half the draws are primes
        n = rng.randint(2, 10**5)
    return n


def _multiples(rng: random.Random) -> tuple[int, int]:
    g = rng.choice([1, rng.randint(1, 500)])  # often a common factor above 1
    return g * _int(rng, 1, 10**4), g * _int(rng, 1, 10**4)


def _distinct_at_least_two(rng: random.Random) -> list[int]:
    values = rng.sample(range(-100, 101), rng.randint(2, 8))
    xs = values + rng.choices(values, k=rng.randint(0, 4))
    rng.shuffle(xs)
    return xs


def _anagram_or_not(rng: random.Random) -> tuple[str, str]:
    a = _text(rng, "abcd", 8)
    return a, "".join(rng.sample(a, len(a))) if rng.random() < 0.5 else _text(rng, "abcd", 8)


def _brackets(rng: random.Random) -> str:
    if rng.random() < 0.5:  # balanced by construction
        out = ""
        for _ in range(rng.randint(0, 5)):
            left, right = rng.choice(["()", "[]", "{}"])
            out = rng.choice([left + out + right, out + left + right])
        return out
    return _text(rng, "()[]{}", 10)


# Reference solutions (names are the functions the tasks ask for).


def add(a, b):
    return a + b


def reverse(s):
    return s[::-1]


def count_vowels(s):
    return sum(c in "aeiouAEIOU" for c in s)


def is_palindrome(s):
    return s == s[::-1]


def largest(xs):
    return max(xs)


def factorial(n):
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def evens(xs):
    return [x for x in xs if x % 2 == 0]


def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def is_prime(n):
    if n < 2:
        return False
    k = 2
    while k * k <= n:
        if n % k == 0:
            return False
        k += 1
    return True


def digit_sum(n):
    return sum(int(d) for d in str(n))


def count_words(s):
    return len(s.split())


def second_largest(xs):
    return sorted(set(xs))[-2]


def run_length(s):
    out = []
    for c in s:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return "".join(f"{c}{k}" for c, k in out)


def rotate(xs, k):
    if not xs:
        return []
    k %= len(xs)
    return xs[len(xs) - k :] + xs[: len(xs) - k]


def dedupe(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def to_binary(n):
    return bin(n)[2:]


def caesar(s, k):
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in s)


def flatten(xss):
    return [x for xs in xss for x in xs]


def max_subarray(xs):
    best = current = xs[0]
    for x in xs[1:]:
        current = max(x, current + x)
        best = max(best, current)
    return best


def are_anagrams(a, b):
    return sorted(a) == sorted(b)


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def merge_sorted(xs, ys):
    return sorted(xs + ys)


def balanced(s):
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for c in s:
        if c in "([{":
            stack.append(c)
        elif not stack or stack.pop() != pairs[c]:
            return False
    return not stack


def to_roman(n):
    numerals = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ]
    out = ""
    for value, numeral in numerals:
        while n >= value:
            out, n = out + numeral, n - value
    return out


def pair_count(xs, target):
    return sum(xs[i] + xs[j] == target for i in range(len(xs)) for j in range(i + 1, len(xs)))


PROBLEMS: list[Problem] = [
    Problem("add(a, b)", "returns a + b", add, lambda r: (_int(r, -(10**6), 10**6), _int(r, -(10**6), 10**6))),
    Problem("reverse(s)", "returns the string s reversed", reverse, lambda r: (_text(r, "abc xyz"),)),
    Problem(
        "count_vowels(s)", "returns how many of the characters of s are in 'aeiouAEIOU'", count_vowels, lambda r: (_text(r, "aeiouAEIOUbcdxyz !"),)
    ),
    Problem(
        "is_palindrome(s)", "returns True when the string s reads the same backwards, else False", is_palindrome, lambda r: (_palindrome_or_not(r),)
    ),
    Problem(
        "largest(xs)", "returns the largest number of the non-empty list of integers xs", largest, lambda r: (_ints(r, -1000, 1000, shortest=1),)
    ),
    Problem("factorial(n)", "returns n! for an integer n >= 0 (0! = 1)", factorial, lambda r: (_int(r, 0, 150),)),
    Problem("fib(n)", "returns the n-th Fibonacci number, fib(0) = 0 and fib(1) = 1", fib, lambda r: (_int(r, 0, 300),)),
    Problem("evens(xs)", "returns the even numbers of the list of integers xs, in order", evens, lambda r: (_ints(r, -100, 100),)),
    Problem("gcd(a, b)", "returns the greatest common divisor of the integers a >= 1 and b >= 1", gcd, _multiples),
    Problem("is_prime(n)", "returns True when the integer n (n >= 0) is a prime number, else False", is_prime, lambda r: (_prime_or_not(r),)),
    Problem("digit_sum(n)", "returns the sum of the decimal digits of the integer n >= 0", digit_sum, lambda r: (_int(r, 0, 10**15),)),
    Problem("count_words(s)", "returns the number of whitespace-separated words in the string s", count_words, lambda r: (_sentence(r),)),
    Problem(
        "second_largest(xs)",
        "returns the second largest distinct value of the list of integers xs (xs holds at least two distinct values)",
        second_largest,
        lambda r: (_distinct_at_least_two(r),),
    ),
    Problem(
        "run_length(s)",
        "returns the run-length encoding of the string s: each maximal run of one character "
        "written as the character then the run's length, e.g. 'aaabcc' -> 'a3b1c2' ('' -> '')",
        run_length,
        lambda r: ("".join(r.choice("abc") * r.randint(1, 12) for _ in range(_count(r, 6))),),
    ),
    Problem(
        "rotate(xs, k)",
        "returns the list xs rotated right by k positions (k >= 0, possibly larger than "
        "len(xs)); an empty list stays empty, e.g. rotate([1, 2, 3], 1) == [3, 1, 2]",
        rotate,
        lambda r: (_ints(r, 0, 9), _int(r, 0, 30)),
    ),
    Problem(
        "dedupe(xs)",
        "returns the list xs without repeated values, keeping each value's first occurrence, in order",
        dedupe,
        lambda r: (_ints(r, 0, 6, longest=15),),
    ),
    Problem(
        "to_binary(n)",
        "returns the binary representation of the integer n >= 0 as a string without prefix ('0' for 0)",
        to_binary,
        lambda r: (_int(r, 0, 10**9),),
    ),
    Problem(
        "caesar(s, k)",
        "returns s with every lowercase letter a-z shifted k places forward in the alphabet, "
        "wrapping around after z (k may be any integer, negative shifts backward); other characters unchanged",
        caesar,
        lambda r: (_text(r, "abcxyz ABC!"), _int(r, -60, 60)),
    ),
    Problem(
        "flatten(xss)",
        "returns the concatenation of the lists in the list of lists xss",
        flatten,
        lambda r: ([_ints(r, -9, 9, longest=4) for _ in range(_count(r, 5))],),
    ),
    Problem(
        "max_subarray(xs)",
        "returns the largest sum of a non-empty contiguous part of the non-empty list of integers xs",
        max_subarray,
        lambda r: (_ints(r, -20, 20, shortest=1),),
    ),
    Problem(
        "are_anagrams(a, b)",
        "returns True when the strings a and b contain the same characters the same number of times, else False",
        are_anagrams,
        _anagram_or_not,
    ),
    Problem(
        "collatz_steps(n)",
        "returns how many steps of n -> n / 2 (n even) or n -> 3n + 1 (n odd) take the integer n >= 1 to 1 (0 for n = 1)",
        collatz_steps,
        lambda r: (_int(r, 1, 10**5),),
    ),
    Problem(
        "merge_sorted(xs, ys)",
        "returns the sorted list of all the values of the sorted lists of integers xs and ys (duplicates kept)",
        merge_sorted,
        lambda r: (sorted(_ints(r, -50, 50)), sorted(_ints(r, -50, 50))),
    ),
    Problem(
        "balanced(s)",
        "returns True when the brackets ()[]{} of the string s (made of those characters only) are balanced and properly nested, else False",
        balanced,
        lambda r: (_brackets(r),),
    ),
    Problem(
        "to_roman(n)",
        "returns the integer 1 <= n <= 3999 in Roman numerals (subtractive forms such as IV, IX, XL, CM)",
        to_roman,
        lambda r: (_int(r, 1, 3999),),
    ),
    Problem(
        "pair_count(xs, target)",
        "returns how many pairs of positions i < j of the list of integers xs have xs[i] + xs[j] == target",
        pair_count,
        lambda r: (_ints(r, -5, 5), _int(r, -6, 6)),
    ),
]
