"""The docs' environment example (docs/environments.md, "A new environment") runs as written, its own
assertions included, and stays under 50 lines."""

import re
from pathlib import Path

from flywheel.envs.base import Environment, Task
from flywheel.envs.registry import make_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "environments.md"


def example() -> str:
    section = PAGE.read_text().split("## A new environment\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_docs_example_registers_a_working_environment():
    code = example()
    assert len(code.splitlines()) < 50
    exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_example"})
    env = make_env("guess_number", max_turns=3)
    assert isinstance(env, Environment) and env.max_turns == 3
    task = env.tasks(1, seed=0)[0]
    assert task == Task("I picked a number from 1 to 100. Guess it.", "50")
    env.reset(task)
    assert [env.step(t).observation for t in ("25", "75", "no idea")] == ["Higher.", "Lower.", "That is not a number. Guess again."]
    result = env.step("50")
    assert result.done and result.reward == 0.25 and result.info == {"guesses": 4}
