"""What a config asks for that only the implementations can check, before anything starts: the
environment exists and its arguments fit its constructor, dataset files read, reward functions
import, guards exist. ``config.load_config`` checks the schema and the files the config names; the
command line, ``flywheel.train`` and ``flywheel.evaluate`` run ``check_config`` right after it.
Nothing is instantiated here: an environment may start processes.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

from flywheel.config import Config, ConfigError, RewardFunctionConfig, TaskConfig, load_config
from flywheel.config.algorithms import teacher_directory
from flywheel.envs.dataset import dataset_problem, dataset_tasks, function_check_problem, long_prompt_problem, shown_test_rows
from flywheel.envs.registry import env_factory, known_envs
from flywheel.rewards.graders import code_arguments
from flywheel.rewards.guards import default_guards
from flywheel.rewards.user_functions import load_function


def check_config(config: Config) -> Config:
    """``config`` itself when everything it names can be made; else ConfigError naming the first problem."""
    evals = [f"eval.environments.{key}: {problem}" for key, task in config.eval.environments.items() if (problem := task_problem(task))]
    problems = (
        task_problem(config.task),
        *evals,
        functions_problem(config.reward.functions),
        guards_problem(config.reward.guards),
        teacher_problem(config),
    )
    for problem in problems:
        if problem:
            raise ConfigError(problem)
    if config.task.dataset is not None:  # refused: any long row; skipped: only when every row is
        kwargs = config.task.env_kwargs()
        if problem := long_prompt_problem(config.model.path, config.rollout.max_new_tokens, long_prompts_mode=config.task.long_prompts, **kwargs):
            raise ConfigError(problem)
    if warning := shown_tests_warning(config.task):
        print(f"flywheel: warning: {warning}", file=sys.stderr)
    if config.reward.check_rows:
        if config.task.dataset is None:
            raise ConfigError("reward.check_rows needs task.dataset (the rows it calls the functions on); set it to 0")
        r = config.reward
        if problem := function_check_problem(r.check_rows, [f.name for f in r.functions], r.function_timeout_s, **config.task.env_kwargs()):
            raise ConfigError(problem)
    return config


def teacher_problem(config: Config) -> str | None:
    """Whether a distillation teacher (``algorithm.teacher``) reads tokens as the policy does: it scores the policy's token ids."""
    teacher = teacher_directory(config.algorithm)
    if teacher is None:  # none, or a server's, whose tokenizer cannot be read from here
        return None
    from transformers import AutoTokenizer

    if AutoTokenizer.from_pretrained(teacher).get_vocab() != AutoTokenizer.from_pretrained(config.model.path).get_vocab():
        return f"algorithm.teacher '{teacher}' has another vocabulary than model.path '{config.model.path}'; the teacher must share the policy's tokenizer"
    return None


def shown_tests_warning(task: TaskConfig) -> str | None:
    """The risk a code dataset that shows its tests runs with ``task.grader_args.shown_tests: allow``, in one sentence."""
    args = code_arguments(task.grader, task.grader_args) if task.dataset is not None else None
    if not args or args["shown_tests"] != "allow" or args["reference_column"] is not None:
        return None
    tasks = dataset_tasks(task.dataset, "task.dataset", task.prompt_column, task.answer_column, task.reference_extraction, task.answer_tag)
    rows = shown_test_rows(tasks, args)
    if not rows:
        return None
    return (
        f"{len(rows)} of {len(tasks)} rows of task.dataset show every test case in their prompt and are graded on exactly those "
        "(task.grader_args.shown_tests is allow): a function fitted to the shown cases scores 1.0 there"
    )


def task_problem(task: TaskConfig) -> str | None:
    """Whether the environment exists and its env_args fit its constructor."""
    for module in task.imports:
        try:
            importlib.import_module(module)
        except ImportError as error:
            return f"task.imports: cannot import {module!r} ({error})"
    if task.name not in known_envs():
        return f"unknown task.name {task.name!r}: use one of the environments {', '.join(known_envs())} (or add the module registering yours to task.imports)"
    try:
        inspect.signature(env_factory(task.name)).bind(**task.env_kwargs())
    except TypeError as error:
        return f"task.env_args do not fit environment {task.name!r}: {error}"
    if task.dataset is not None:
        return dataset_problem(**task.env_kwargs())
    return None


def functions_problem(functions: list[RewardFunctionConfig]) -> str | None:
    """Whether every reward function can be imported (importing its module, as task.imports does)."""
    for function in functions:
        try:
            load_function(function.name)
        except ValueError as error:
            return f"reward.functions: {error}"
    return None


def guards_problem(guards: tuple[str, ...] | None) -> str | None:
    known = [g.name for g in default_guards()]
    unknown = [name for name in guards or () if name not in known]
    return f"reward.guards: unknown guard {unknown[0]!r}; known guards: {', '.join(known)}" if unknown else None


def load_run_config(path: str | Path | None, overrides: list[str] = ()) -> Config:
    """``config.load_config`` then ``check_config``: what the command line runs before starting anything."""
    return check_config(load_config(path, overrides))
