"""Registering environments by name."""

import pytest

from flywheel.envs.base import Environment, StepResult, Task, final
from flywheel.envs.registry import known_envs, make_env, register_env


@register_env("echo-test")
class Echo:
    max_turns, time_limit_s, system_prompt, tools, stop = 2, 5.0, None, (), ()

    def __init__(self, word: str = "hi") -> None:
        self.word = word

    def tasks(self, size: int, seed: int) -> list[Task]:
        return [Task(self.word, self.word)] * size

    def reset(self, task: Task) -> str:
        self.task = task
        return task.prompt

    def step(self, model_text: str) -> StepResult:
        return final(float(model_text == self.task.answer))


def test_make_env_builds_a_fresh_instance_with_kwargs():
    env = make_env("echo-test", word="yo")
    assert isinstance(env, Environment) and env is not make_env("echo-test")
    assert env.reset(env.tasks(1, seed=0)[0]) == "yo"
    assert env.step("yo") == StepResult(None, 1.0, True, {})
    assert "echo-test" in known_envs()


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError) as e:
        make_env("ech")
    assert str(e.value) == f"unknown environment 'ech' (known environments: {', '.join(known_envs())})"


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="environment 'echo-test' is already registered"):
        register_env("echo-test")(type("Other", (Echo,), {}))


def test_builtins_are_imported_once_and_later_registrations_still_count(monkeypatch):
    import importlib

    from flywheel.envs import registry

    imports: list[str] = []
    real = importlib.import_module

    def counting(name: str, package: str | None = None):
        imports.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", counting)
    monkeypatch.setattr(registry, "_builtins_loaded", False)  # as in a fresh process
    for _ in range(100):  # a step of the quickstart makes an environment per episode
        make_env("arithmetic", digits=2)
    assert known_envs() == sorted(registry._REGISTRY)
    assert imports == [f"flywheel.envs.{m}" for m in registry._BUILTIN_MODULES]  # one import of each, all told

    @register_env("late-test")  # a user's environment registered after the built-ins were loaded
    class Late(Echo):
        pass

    assert "late-test" in known_envs() and isinstance(make_env("late-test"), Late)
    assert len(imports) == len(registry._BUILTIN_MODULES)
