"""Hidden-test rewards through the real sandbox (bubblewrap jail, pre-forked pool)."""

import pytest

from flywheel.rewards.code import hidden_tests_reward, solution_source
from flywheel.rewards.guards import ExitTricks
from flywheel.sandbox import Sandbox

CASES = [((2, 3), 5), ((-1, 1), 0), ((10, 5), 15), ((0, 0), 0)]
ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, cpu_seconds=2, wall_timeout_s=5.0) as sb:
        yield sb


def test_correct_code_in_a_fence_scores_one(sandbox):
    completion = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"
    reward, report = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 1.0 and report.passed == 4


def test_partial_code_scores_its_pass_rate(sandbox):
    # a + b when a > 0, else a * b: (2, 3) -> 5 pass; (-1, 1) -> -1 fail; (10, 5) -> 15 pass; (0, 0) -> 0 pass
    completion = "def add(a, b):\n    return a + b if a > 0 else a * b\n"
    reward, _ = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 0.75


def test_exiting_with_code_zero_earns_nothing_and_is_flagged(sandbox):
    completion = "```python\nimport sys\nsys.exit(0)\ndef add(a, b):\n    return a + b\n```"
    reward, report = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert reward == 0.0 and report.passed == 0
    assert ExitTricks().check(completion).flagged


def test_prose_without_code_scores_zero(sandbox):
    assert hidden_tests_reward(sandbox, "I would add the two numbers.", "add", CASES) == (0.0, None)


# Honest answers that end or break a program run as __main__ with the jail's argv and stdin: each block below
# runs only when the file is executed as a script, so loaded as a module it is never reached.
MAIN_BLOCKS = {
    "unittest": "import unittest\n\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "if __name__ == '__main__':\n    unittest.main()\n",
    "sys_exit_main": "import sys\n\ndef main():\n    print(add(2, 3))\n    return 0\n\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "input_demo": "if __name__ == '__main__':\n    a, b = map(int, input('two numbers: ').split())\n    print(add(a, b))\n",
    "argparse": "import argparse\n\nif __name__ == '__main__':\n    p = argparse.ArgumentParser()\n    p.add_argument('a', type=int)\n"
    "    p.add_argument('b', type=int)\n    args = p.parse_args()\n    print(add(args.a, args.b))\n",
}


@pytest.mark.parametrize("shape", sorted(MAIN_BLOCKS))
def test_an_honest_main_block_does_not_end_the_grading(sandbox, shape):
    completion = f"```python\n{ADD}\n{MAIN_BLOCKS[shape]}```\n"
    reward, report = hidden_tests_reward(sandbox, completion, "add", CASES)
    assert (reward, report.execution.exit_code) == (1.0, 0)


def test_the_module_sees_no_arguments_and_an_empty_stdin(sandbox):
    probe = "import sys\n\ndef add(a, b):\n    return [sys.argv, __name__, sys.stdin.read()]\n"
    _, report = hidden_tests_reward(sandbox, f"```python\n{probe}```", "add", [((1, 2), None)])
    assert report.cases[0].output == [[""], "solution", ""]


def test_a_dataclass_in_the_solution_works_as_in_an_imported_module(sandbox):
    # dataclasses looks its class's module up in sys.modules: the solution must be registered there
    code = (
        "from dataclasses import dataclass\n\n@dataclass\nclass P:\n    a: int\n    b: int\n\ndef add(a, b):\n    p = P(a, b)\n    return p.a + p.b\n"
    )
    assert hidden_tests_reward(sandbox, f"```python\n{code}```", "add", CASES)[0] == 1.0


SOLUTION_AND_EXAMPLE = f"""Here is the function:

```python
{ADD}```

Example:

```python
>>> add(2, 3)
5
```
"""


def test_a_solution_followed_by_a_doctest_example_scores_one(sandbox):
    assert hidden_tests_reward(sandbox, SOLUTION_AND_EXAMPLE, "add", CASES)[0] == 1.0


def test_docstring_doctests_and_a_usage_block_after_the_solution_score_one(sandbox):
    code = 'def add(a, b):\n    """Sum.\n\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n'
    completion = f"```python\n{code}```\nUsage:\n```python\nprint(add(2, 3))  # 5\n```\nand from a shell:\n```bash\npython add.py\n```"
    assert hidden_tests_reward(sandbox, completion, "add", CASES)[0] == 1.0


def test_the_last_block_defining_the_function_is_the_solution(sandbox):
    # a first wrong attempt, then the fix: the fix is graded, alone
    completion = "```python\ndef add(a, b):\n    return a - b\n```\nOops, fixed:\n```py\ndef add(a, b):\n    return a + b\n```"
    assert hidden_tests_reward(sandbox, completion, "add", CASES)[0] == 1.0


@pytest.mark.parametrize(
    ("completion", "source"),
    [
        (SOLUTION_AND_EXAMPLE, ADD),
        ("```python\nadd = lambda a, b: a + b\n```", "add = lambda a, b: a + b\n"),
        ("```Python3\nfrom operator import add\n```", "from operator import add\n"),
        ("  ```python\n  def add(a, b):\n      return a + b\n  ```", ADD),  # a fence indented in a list
        ("No closing fence (a stop string ate it):\n```python\n" + ADD, ADD),
        (ADD, ADD),  # bare code, no fence
        ("```python\ndef plus(a, b):\n    return a + b\n```", None),  # not the requested function
        ("```python\ndef add(a, b):\n    return a +\n```", None),  # does not parse
        ("```python\nclass K:\n    def add(self, a, b):\n        return a + b\n```", None),  # a method, not a module name
        ("I would add them: add(a, b) = a + b.", None),
    ],
)
def test_solution_source_rule(completion, source):
    assert solution_source(completion, "add") == source
