"""The 'dataset' environment from config: task.dataset and its keys, checked at load (columns only, one sentence),
splits from files or by seed, chat-message prompts, and grading of the final message."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.config import ConfigError, dump_config
from flywheel.envs.dataset_files import DatasetFileError
from flywheel.preflight import load_run_config
from flywheel.rollout.stream import load_tasks, prompt_indices

REPO = Path(__file__).resolve().parents[2]
TRAIN, TEST = REPO / "assets/word-problems/train.jsonl", REPO / "assets/word-problems/test.jsonl"
WORD_PROBLEMS = [f"task.dataset={TRAIN}", "task.prompt_column=question", "task.reference_extraction=gsm8k"]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_task_dataset_chooses_the_dataset_environment_and_round_trips(tmp_path):
    config = load_run_config(None, [*WORD_PROBLEMS, f"task.eval_dataset={TEST}", "task.grader=numeric", "task.answer_extraction=last_number"])
    assert config.task.name == "dataset"
    saved = tmp_path / "config.yaml"
    saved.write_text(dump_config(config))
    assert load_run_config(saved) == config


def test_splits_from_files_keep_file_order_and_cap_the_eval_rows():
    tasks = load_tasks(load_run_config(None, [*WORD_PROBLEMS, f"task.eval_dataset={TEST}", "task.eval_size=30", "task.seed=3"]))
    train_rows = [json.loads(line) for line in TRAIN.read_text().splitlines()]
    test_questions = [json.loads(line)["question"] for line in TEST.read_text().splitlines()]
    assert [t.prompt for t in tasks.train] == [r["question"] for r in train_rows]  # all 400, in file order
    assert tasks.train[0].answer == train_rows[0]["answer"].rsplit("#### ", 1)[1]  # the reference: the #### line
    assert tasks.train[0].metadata["columns"] == {"answer": train_rows[0]["answer"]}  # every column but the prompt
    positions = [test_questions.index(t.prompt) for t in tasks.eval]
    assert len(positions) == 30 and positions == sorted(positions)  # a seeded sample of the 100, in file order
    again = load_tasks(load_run_config(None, [*WORD_PROBLEMS, f"task.eval_dataset={TEST}", "task.eval_size=30", "task.seed=4"]))
    assert [t.prompt for t in again.eval] != [t.prompt for t in tasks.eval]  # another seed, another sample


def test_a_seeded_split_holds_rows_out_of_the_train_file():
    first = load_tasks(load_run_config(None, [*WORD_PROBLEMS, "task.eval_size=50"]))
    same = load_tasks(load_run_config(None, [*WORD_PROBLEMS, "task.eval_size=50"]))
    assert (len(first.train), len(first.eval)) == (350, 50)
    assert first.train == same.train and first.eval == same.eval
    assert not {t.prompt for t in first.train} & {t.prompt for t in first.eval}


def test_train_rows_are_shuffled_once_per_epoch():
    tasks = load_tasks(load_run_config(None, [*WORD_PROBLEMS, "task.eval_size=50"]))
    n = len(tasks.train)
    epoch0, epoch1 = prompt_indices(n, 0, n, seed=0), prompt_indices(n, n, n, seed=0)
    assert sorted(epoch0) == sorted(epoch1) == list(range(n)) and epoch0 != epoch1 and epoch0 != list(range(n))


def test_an_eval_split_as_large_as_the_file_is_one_sentence():
    with pytest.raises(
        DatasetFileError, match=r"task.eval_size \(400\) must be smaller than the 400 rows of task.dataset '.*'; lower it or give task.eval_dataset"
    ):
        load_tasks(load_run_config(None, [*WORD_PROBLEMS, "task.eval_size=400"]))


def test_the_final_message_is_extracted_and_graded():
    config = load_run_config(None, [*WORD_PROBLEMS, "task.grader=numeric", "task.answer_extraction=gsm8k", "task.eval_size=50"])
    tasks = load_tasks(config)
    env, task = tasks.env_factory(), tasks.train[0]
    assert env.reset(task) == task.prompt and task.answer == "24"
    assert env.step("8 in May, so 16 + 8 = 24.\n#### 24").reward == 1.0
    env.reset(task)
    assert env.step("#### 25").reward == 0.0
    env.reset(task)
    assert env.step("24, without the #### line").reward == 0.0  # gsm8k extraction finds nothing: 0


def test_chat_message_prompts_are_the_whole_prompt(tmp_path):
    messages = [{"role": "system", "content": "Answer in a tag."}, {"role": "user", "content": "2+2?"}]
    path = jsonl(
        tmp_path / "chat.jsonl", [{"prompt": messages, "answer": "4", "source": "hand"}, {"prompt": "3+3?", "answer": "6", "source": "hand"}]
    )
    config = load_run_config(
        None, [f"task.dataset={path}", "task.eval_size=1", "task.seed=1", "task.answer_extraction=tag", "task.system_prompt=Be brief."]
    )
    tasks = load_tasks(config)
    [chat] = [t for t in tasks.train + tasks.eval if "messages" in t.metadata]
    env = tasks.env_factory()
    assert env.system_prompt == "Be brief."
    assert env.reset(chat) == messages and chat.prompt == "2+2?"  # the prompt text: the last user message
    assert env.step("<answer>4</answer>").reward == 1.0


def test_loading_reads_every_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"prompt": "1+1", "answer": "2"}) + "\n{broken\n")
    with pytest.raises(
        ConfigError, match=rf"^task.dataset '{path}' line 2 is not valid JSON \(Expecting property name enclosed in double quotes\); write"
    ):
        load_run_config(None, [f"task.dataset={path}", "task.eval_size=1"])


def test_a_row_without_its_reference_is_one_sentence_at_load(tmp_path):
    path = jsonl(tmp_path / "rows.jsonl", [{"question": "q1", "answer": "#### 1"}, {"question": "q2", "answer": "two"}])
    with pytest.raises(ConfigError, match=r"row 2: task.reference_extraction 'gsm8k' finds no answer in column 'answer' \('two'\); fix the row"):
        load_run_config(None, [f"task.dataset={path}", "task.prompt_column=question", "task.reference_extraction=gsm8k", "task.eval_size=1"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["task.dataset=nowhere.jsonl"],
            "task.dataset 'nowhere.jsonl' does not exist; give the path of a JSONL, Parquet or CSV file or a save_to_disk directory",
        ),
        (
            [f"task.dataset={TRAIN}"],
            f"task.prompt_column 'prompt' is not a column of task.dataset '{TRAIN}' (its columns: question, answer); set task.prompt_column to one of them",
        ),
        ([*WORD_PROBLEMS, "task.answer_column=solution"], "task.answer_column 'solution' is not a column of task.dataset"),
        ([*WORD_PROBLEMS, f"task.eval_dataset={REPO / 'configs/quickstart.yaml'}"], "task.eval_dataset '"),
        ([*WORD_PROBLEMS, "task.answer_column=null"], "task.grader 'exact' compares with a reference answer: set task.answer_column"),
        ([*WORD_PROBLEMS, "task.grader=code"], "task.grader_args 'function' is not a column of task.dataset"),
        ([*WORD_PROBLEMS, "task.grader=judge"], "task.grader 'judge' scores with the LLM judge: set reward.judge.enabled=true"),
        (
            [*WORD_PROBLEMS, "task.train_size=100"],
            "task.train_size does nothing with task.dataset (every row of the file is a train task); remove it",
        ),
        ([*WORD_PROBLEMS, "task.name=arithmetic"], "task.dataset is read by the 'dataset' environment, not 'arithmetic': leave task.name out"),
        (
            [*WORD_PROBLEMS, "task.answer_tag=final"],
            "task.answer_tag does nothing unless task.answer_extraction or task.reference_extraction is 'tag'",
        ),
        ([*WORD_PROBLEMS, "task.answer_extraction=first"], "bad value for 'task.answer_extraction'"),
        (
            ["task.prompt_column=question"],
            "task.prompt_column does nothing without task.dataset; set task.dataset to the file of prompts and answers",
        ),
        (["task.name=dataset"], "task.name 'dataset' needs task.dataset: the path of a JSONL, Parquet or CSV file or a save_to_disk directory"),
    ],
)
def test_config_mistakes_are_one_sentence(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_run_config(None, overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_cli_names_a_missing_column_and_exits_2(tmp_path):
    (tmp_path / "assets").symlink_to(REPO / "assets")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flywheel.cli",
            "train",
            str(REPO / "configs/quickstart.yaml"),
            "task.name=dataset",
            "task.env_args={}",
            f"task.dataset={TRAIN}",
            "task.train_size=5000",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip (this tree's flywheel, whatever is installed)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().endswith(
        "task.prompt_column 'prompt' is not a column of task.dataset "
        f"'{TRAIN}' (its columns: question, answer); set task.prompt_column to one of them"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_code_rows_run_their_hidden_tests_in_the_sandbox(tmp_path):
    cases = [[[2, 3], 5], [[-1, 1], 0], [[10, 5], 15], [[0, 0], 0]]
    rows = [{"prompt": "Write add(a, b).", "fn": "add", "tests": cases}, {"prompt": "Write add(a, b) again.", "fn": "add", "tests": cases}]
    overrides = [f"task.dataset={jsonl(tmp_path / 'code.jsonl', rows)}", "task.answer_column=null", "task.grader=code", "task.eval_size=1"]
    tasks = load_tasks(load_run_config(None, [*overrides, "task.grader_args={function_column: fn, cases_column: tests}"]))
    env = tasks.env_factory()
    env.reset(tasks.train[0])
    # a + b when a > 0, else a * b: (-1, 1) gives -1, the other three pass
    assert env.step("```python\ndef add(a, b):\n    return a + b if a > 0 else a * b\n```").reward == 0.75


def test_a_user_grader_in_a_file_gets_the_rows_columns(tmp_path):
    grader = tmp_path / "grading.py"
    grader.write_text("def close_enough(answer, reference, row):\n    return 1.0 if answer == reference + ' ' + row['unit'] else 0.25\n")
    rows = [{"prompt": "How far?", "answer": "3", "unit": "km"}, {"prompt": "How long?", "answer": "2", "unit": "h"}]
    config = load_run_config(
        None, [f"task.dataset={jsonl(tmp_path / 'rows.jsonl', rows)}", f"task.grader={grader}:close_enough", "task.eval_size=1", "task.seed=0"]
    )
    tasks = load_tasks(config)
    env, task = tasks.env_factory(), tasks.train[0]
    env.reset(task)
    right = f"{task.answer} {task.metadata['columns']['unit']}"
    assert env.step(right).reward == 1.0
    env.reset(task)
    assert env.step("far").reward == 0.25


def test_the_judge_grader_loads_with_the_judge_on():
    config = load_run_config(None, [*WORD_PROBLEMS, "task.grader=judge", "reward.judge.enabled=true"])
    assert (config.task.grader, config.reward.judge.enabled) == ("judge", True)
