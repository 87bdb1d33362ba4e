"""Tasks from a dataset file, graded by a configured grader: the ``dataset`` environment (chosen by ``task.dataset``).

A row is one task: its prompt column (text, or a list of ``{role, content}`` chat messages: the whole
prompt, rendered through the model's chat template with ``system_prompt`` first unless the messages
start with their own), its answer column (the reference, taken from the column's text by
``reference_extraction``) and every other column, passed to the grader and to the reward functions
of ``reward.functions`` (``Task.metadata["columns"]``: every column but the prompt, as TRL passes them).

One turn: the model's message is read by ``answer_extraction`` (rewards/extraction.py) and scored by
``grader`` (rewards/graders.py). Splits: the train file's rows in file order (the rollout shuffles
them once per epoch), and either ``eval_dataset`` (at most ``eval_size`` of its rows, a seeded
sample kept in file order) or ``eval_size`` rows of the train file held out by ``seed``.

Nothing is read when the environment is made (one per episode); ``splits`` reads the files.
``dataset_problem`` checks a config at load: the files' column names, then every row (a malformed line,
an encoding that is not UTF-8, a missing column or reference: one sentence naming the file and line or row).
With ``reward.check_rows``, ``function_check_problem`` calls each reward function and a user grader
on the first rows at load (their reference answers as the completions).
A row whose rendered prompt leaves less than ``rollout.max_new_tokens`` of the model's context
(``max_position_embeddings``) is skipped and counted (``long_prompts``), or refused at load when
``task.long_prompts`` is 'refuse' (``long_prompt_problem``).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flywheel.envs.base import StepResult, Task, final
from flywheel.envs.dataset_files import DatasetFileError, column_names, read_rows
from flywheel.envs.episode import Renderer
from flywheel.envs.registry import register_env
from flywheel.rewards.code_cases import shown_cases
from flywheel.rewards.extraction import Extraction, extract_answer
from flywheel.rewards.faults import RewardFault, UserFunctionBug
from flywheel.rewards.graders import GRADERS, Grader, code_arguments, grader_problem, make_grader, needed_columns
from flywheel.rewards.trl_functions import call_trl_function
from flywheel.rewards.user_functions import load_function

Message = dict[str, str]
ROLES = ("system", "user", "assistant", "tool")


@register_env("dataset")
class DatasetEnv:
    """One turn on a row of a dataset file, graded by ``grader`` on the answer ``answer_extraction`` finds."""

    max_turns, tools, stop = 1, (), ()

    def __init__(
        self,
        dataset: str,
        eval_dataset: str | None = None,
        prompt_column: str = "prompt",
        answer_column: str | None = "answer",
        system_prompt: str | None = None,
        grader: str = "exact",
        grader_args: dict[str, Any] | None = None,
        answer_extraction: Extraction = "whole",
        answer_tag: str = "answer",
        reference_extraction: Extraction = "whole",
        time_limit_s: float = 60.0,
    ) -> None:
        self.dataset, self.eval_dataset = dataset, eval_dataset
        self.prompt_column, self.answer_column = prompt_column, answer_column
        self.system_prompt, self.time_limit_s = system_prompt, time_limit_s
        self.grader, self.grader_args = grader, dict(grader_args or {})
        self.answer_extraction, self.answer_tag, self.reference_extraction = answer_extraction, answer_tag, reference_extraction

    def tasks(self, size: int, seed: int) -> list[Task]:
        """The first ``size`` rows of the train file (``seed`` unused: the file fixes the order)."""
        return self._tasks(self.dataset, "task.dataset")[:size]

    def splits(self, train_size: int, eval_size: int, seed: int) -> tuple[list[Task], list[Task]]:
        """Train and held-out tasks (module docstring); ``train_size`` is unused: every train row is a task."""
        train = self._tasks(self.dataset, "task.dataset")
        if self.eval_dataset is not None:
            held_out = self._tasks(self.eval_dataset, "task.eval_dataset")
            return train, [held_out[i] for i in sample_indices(len(held_out), min(eval_size, len(held_out)), seed)]
        if eval_size >= len(train):
            raise DatasetFileError(
                f"task.eval_size ({eval_size}) must be smaller than the {len(train)} rows of task.dataset '{self.dataset}'; lower it or give task.eval_dataset"
            )
        held = set(sample_indices(len(train), eval_size, seed))
        return [t for i, t in enumerate(train) if i not in held], [train[i] for i in sorted(held)]

    def _tasks(self, path: str, key: str) -> list[Task]:
        return dataset_tasks(path, key, self.prompt_column, self.answer_column, self.reference_extraction, self.answer_tag)

    def reset(self, task: Task) -> str | list[Message]:
        self.answer, self.columns = task.answer, task.metadata["columns"]
        return task.metadata.get("messages", task.prompt)

    def step(self, model_text: str) -> StepResult:
        answer = extract_answer(model_text, self.answer_extraction, self.answer_tag)
        return final(float(self._grade(answer, self.answer, self.columns)))

    @property
    def _grade(self) -> Grader:
        return _grader(self.grader, tuple(sorted(self.grader_args.items())))


_GRADERS: dict[tuple, Grader] = {}


def _grader(name: str, args: tuple) -> Grader:
    """One grader per (name, args) in a process: environments are made per episode."""
    if (name, args) not in _GRADERS:
        _GRADERS[name, args] = make_grader(name, dict(args))
    return _GRADERS[name, args]


def dataset_tasks(path: str, key: str, prompt_column: str, answer_column: str | None, reference_extraction: Extraction, tag: str) -> list[Task]:
    """The task of every row of a dataset file, in file order; DatasetFileError names a bad file, line or row."""
    return [row_task(row, n, path, key, prompt_column, answer_column, reference_extraction, tag) for n, row in enumerate(read_rows(path, key), 1)]


def sample_indices(count: int, size: int, seed: int) -> list[int]:
    """``size`` of ``range(count)`` drawn by ``seed``, in increasing order."""
    return sorted(random.Random(seed).sample(range(count), size))


def row_task(
    row: dict[str, Any], number: int, path: str, key: str, prompt_column: str, answer_column: str | None, reference_extraction: Extraction, tag: str
) -> Task:
    """The task of row ``number`` (1-based) of a dataset (module docstring); DatasetFileError names a bad row."""
    where = f"{key} '{path}' row {number}"
    for column in filter(None, (prompt_column, answer_column)):
        if column not in row:
            raise DatasetFileError(f"{where} has no column '{column}'; give every row one")
    prompt = row[prompt_column]
    columns = {k: v for k, v in row.items() if k != prompt_column}
    metadata: dict[str, Any] = {"columns": columns}
    if isinstance(prompt, list):
        if not prompt or not all(isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in prompt):
            raise DatasetFileError(
                f"{where}: column '{prompt_column}' must hold text or a non-empty list of {{role, content}} messages (roles: {', '.join(ROLES)})"
            )
        metadata["messages"] = [{"role": m["role"], "content": m["content"]} for m in prompt]
        prompt = next((m["content"] for m in reversed(prompt) if m["role"] == "user"), prompt[-1]["content"])
    elif not isinstance(prompt, str) or not prompt:
        raise DatasetFileError(f"{where}: column '{prompt_column}' must hold text or a list of {{role, content}} messages (got {prompt!r})")
    if answer_column is None:
        return Task(prompt, "", metadata)
    raw = row[answer_column]
    reference = extract_answer("" if raw is None else str(raw), reference_extraction, tag)
    if reference is None:
        raise DatasetFileError(
            f"{where}: task.reference_extraction '{reference_extraction}' finds no answer in column '{answer_column}' ({raw!r}); fix the row or change task.reference_extraction"
        )
    return Task(prompt, reference, metadata)


def dataset_problem(
    dataset: str,
    eval_dataset: str | None = None,
    prompt_column: str = "prompt",
    answer_column: str | None = "answer",
    grader: str = "exact",
    grader_args: dict[str, Any] | None = None,
    reference_extraction: Extraction = "whole",
    answer_tag: str = "answer",
    **_: Any,
) -> str | None:
    """One sentence on what keeps the dataset keys of a config from working, or None; reads the files'
    column names, then every row (and imports a user grader's module)."""
    problem = grader_problem(grader, grader_args or {})
    if problem:
        return problem
    if answer_column is None and grader in ("exact", "numeric", "math"):
        return f"task.grader '{grader}' compares with a reference answer: set task.answer_column"
    wanted = [("task.prompt_column", prompt_column)]
    wanted += [("task.answer_column", answer_column)] if answer_column else []
    wanted += [("task.grader_args", column) for column in needed_columns(grader, grader_args or {})]
    for key, path in (("task.dataset", dataset), ("task.eval_dataset", eval_dataset)):
        if path is None:
            continue
        try:
            columns = column_names(path, key)
        except DatasetFileError as error:
            return str(error)
        for setting, column in wanted:
            if column not in columns:
                return f"{setting} '{column}' is not a column of {key} '{path}' (its columns: {', '.join(columns)}); set {setting} to one of them"
        try:
            tasks = dataset_tasks(path, key, prompt_column, answer_column, reference_extraction, answer_tag)
        except DatasetFileError as error:
            return str(error)
        args = code_arguments(grader, grader_args or {})
        if args and args["reference_column"] is None and args["shown_tests"] == "refuse" and (rows := shown_test_rows(tasks, args)):
            return (
                f"{key} '{path}' row {rows[0]} (and {len(rows) - 1} more) shows every test case in its prompt, so the code grader would pay a "
                "function fitted to them; give a reference solution column (task.grader_args.reference_column) to grade on hidden cases, or set "
                "task.grader_args.shown_tests=allow to train on the shown tests anyway"
            )
    return None


def shown_test_rows(tasks: Sequence[Task], args: dict[str, Any]) -> list[int]:
    """Row numbers (1-based) whose prompt shows every one of their code cases (rewards/code_cases.py)."""
    rows = []
    for number, task in enumerate(tasks, 1):
        columns = task.metadata["columns"]
        cases = columns.get(args["cases_column"])
        cases = json.loads(cases) if isinstance(cases, str) else cases
        if isinstance(cases, list) and cases and all(shown_cases(task.prompt, str(columns.get(args["function_column"])), cases)):
            rows.append(number)
    return rows


def prompt_room(model_path: str, max_new_tokens: int) -> int | None:
    """The most prompt tokens the model's context holds with ``max_new_tokens`` after them (None: its
    config.json names no max_position_embeddings)."""
    context = json.loads((Path(model_path) / "config.json").read_text()).get("max_position_embeddings")
    return None if context is None else context - max_new_tokens


def long_prompts(tasks: list[Task], tokenizer: Any, system_prompt: str | None, room: int) -> list[int]:
    """Indices of the tasks whose prompt, rendered as an episode renders it, is longer than ``room`` tokens."""
    renderer = Renderer(tokenizer, system_prompt)
    return [i for i, t in enumerate(tasks) if len(renderer.prompt(t.metadata.get("messages", t.prompt))[0]) > room]


def long_prompt_problem(
    model_path: str,
    max_new_tokens: int,
    dataset: str,
    prompt_column: str = "prompt",
    answer_column: str | None = "answer",
    reference_extraction: Extraction = "whole",
    answer_tag: str = "answer",
    system_prompt: str | None = None,
    long_prompts_mode: str = "refuse",
    **_: Any,
) -> str | None:
    """One sentence naming the first row of ``dataset`` too long for the model's context, or None; with
    ``long_prompts_mode`` 'skip' only when every row is (nothing would be left to train on)."""
    from transformers import AutoTokenizer

    room = prompt_room(model_path, max_new_tokens)
    if room is None:
        return None
    tasks = dataset_tasks(dataset, "task.dataset", prompt_column, answer_column, reference_extraction, answer_tag)
    long = long_prompts(tasks, AutoTokenizer.from_pretrained(model_path), system_prompt, room)
    if long_prompts_mode == "skip" and len(long) == len(tasks):
        return (
            f"every row of task.dataset '{dataset}' has a prompt longer than the model's context leaves room for ({room} tokens: "
            "max_position_embeddings minus rollout.max_new_tokens), so nothing is left to train on; shorten the prompts or lower rollout.max_new_tokens"
        )
    if not long or long_prompts_mode == "skip":
        return None
    return (
        f"task.dataset '{dataset}' row {long[0] + 1} (and {len(long) - 1} more) has a prompt longer than the model's context leaves room for "
        f"({room} tokens: max_position_embeddings minus rollout.max_new_tokens); shorten those rows, or set task.long_prompts=skip to leave them out"
    )


def function_check_problem(
    rows: int,
    functions: Sequence[str],
    timeout_s: float,
    dataset: str,
    prompt_column: str = "prompt",
    answer_column: str | None = "answer",
    reference_extraction: Extraction = "whole",
    answer_tag: str = "answer",
    grader: str = "exact",
    **_: Any,
) -> str | None:
    """One sentence on the first reward function (``module:function`` specs) or user grader that raises,
    times out or returns the wrong shape when called on the first ``rows`` rows of ``dataset``, their
    reference answers standing for the completions; None when all answer."""
    tasks = dataset_tasks(dataset, "task.dataset", prompt_column, answer_column, reference_extraction, answer_tag)[:rows]
    where = f"on the first {len(tasks)} rows of task.dataset, their reference answers as the completions"
    records = [{"prompt": t.prompt, "answer": t.answer, **t.metadata, "reward": 0.0, "model_turns": [t.answer], "completion_ids": []} for t in tasks]
    for spec in functions:
        try:
            asyncio.run(call_trl_function(load_function(spec), spec.rpartition(":")[2], [t.answer for t in tasks], records, timeout_s))
        except (RewardFault, UserFunctionBug) as error:
            return f"reward.check_rows: {error} ({where})"
    if grader in GRADERS:
        return None
    grade = make_grader(grader, {})
    for number, task in enumerate(tasks, 1):
        try:
            grade(task.answer, task.answer, task.metadata["columns"])
        except UserFunctionBug as error:
            return f"reward.check_rows: {error} (on row {number} of task.dataset, its reference answer as the answer)"
        except Exception as error:  # noqa: BLE001 - the user asked for this check: any error is the answer
            return f"reward.check_rows: task.grader {grader!r} raised {type(error).__name__}: {error} (on row {number} of task.dataset, its reference answer as the answer)"
    return None
