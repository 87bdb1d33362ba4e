"""Inputs are checked before anything starts, through the real CLI: a dataset file with a malformed line or
bytes that are not text, an output directory that cannot be created, a resume whose checkpoints are all
corrupt. Each is one sentence naming the file (and line) and exit code 2, and no run directory is made."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def cli(cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    (cwd / "assets").symlink_to(REPO / "assets")
    command = [sys.executable, "-m", "flywheel.cli", "train", str(REPO / "configs/quickstart.yaml"), *overrides]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


DATASET = ("task.name=dataset", "task.env_args={}", "task.eval_size=1")
ROW = json.dumps({"prompt": "1+1=", "answer": "2"})


@pytest.mark.parametrize(
    "content, expected",
    [
        (f"{ROW}\n{ROW}\n\n{ROW[:-1]}\n{ROW}\n".encode(), "line 4 is not valid JSON (Expecting ',' delimiter); write one JSON object per line"),
        (f"{ROW}\n[1, 2]\n".encode(), "line 2 is a list, not an object; write one JSON object per line"),
        (
            f"{ROW}\n".encode() + b"\x89PNG\r\n\x1a\n\x00\x00",
            "line 2 is not UTF-8 text (byte 0x89 at column 1); give a UTF-8 text file (a binary file is not a dataset)",
        ),
        (f"{ROW}\n{ROW}\n{json.dumps({'prompt': '2+2='})}\n".encode(), "row 3 has no column 'answer'; give every row one"),
    ],
)
def test_a_bad_dataset_line_is_one_sentence_naming_file_and_line(tmp_path, content, expected):
    data = tmp_path / "rows.jsonl"
    data.write_bytes(content)
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={data}")) == f"flywheel: error: task.dataset '{data}' {expected}"
    assert not (tmp_path / "runs").exists()


def test_a_binary_file_and_a_bad_csv_line_are_one_sentence(tmp_path):
    binary = tmp_path / "rows.csv"
    binary.write_bytes(b"prompt,answer\n1+1=,2\n\xff\xfe\x00binary")
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={binary}")).endswith(
        f"task.dataset '{binary}' line 3 is not UTF-8 text (byte 0xff at column 1); give a UTF-8 text file (a binary file is not a dataset)"
    )
    wide = tmp_path / "wide.csv"
    wide.write_text("prompt,answer\n1+1=,2\n2+2=,4,extra\n")
    (tmp_path / "assets").unlink()
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={wide}")).endswith(
        f"task.dataset '{wide}' line 3 has 3 cells but the header names 2 columns; fix that line"
    )


def test_an_output_dir_that_cannot_be_created_is_one_sentence(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert one_sentence(cli(tmp_path, f"run.output_dir={blocker}/runs")) == (
        f"flywheel: error: run.output_dir '{blocker}/runs' cannot be created: '{blocker}' is a file, not a directory; choose another run.output_dir"
    )
    (tmp_path / "assets").unlink()
    assert one_sentence(cli(tmp_path, f"run.output_dir={blocker}")) == (
        f"flywheel: error: run.output_dir '{blocker}' cannot be created: '{blocker}' is a file, not a directory; choose another run.output_dir"
    )


def test_a_resume_whose_only_checkpoint_is_corrupt_is_one_sentence(tmp_path):
    checkpoint = tmp_path / "run/checkpoints/step_2"
    checkpoint.mkdir(parents=True)
    torch.save({"version": 2, "rng": [torch.get_rng_state()]}, checkpoint / "trainer_state.pt")
    state = (checkpoint / "trainer_state.pt").read_bytes()
    (checkpoint / "trainer_state.pt").write_bytes(state[: len(state) // 2])  # a write cut short
    (checkpoint / "controller.json").write_text(json.dumps({"step": 2, "next_position": 8, "pending": [], "accepted": 8}))
    message = one_sentence(cli(tmp_path, f"run.resume={tmp_path / 'run'}"))
    assert message.startswith(
        f"flywheel: error: run.resume '{tmp_path / 'run'}' holds no checkpoint to resume from: checkpoint {checkpoint} is corrupt "
        "(trainer_state.pt cannot be loaded: "
    ), message
    assert message.endswith("); resume from an earlier run or start again")


def long_rows(path: Path) -> Path:
    """Five rows of which rows 2 and 4 hold prompts of 82 tokens: more than tiny-adder's 64-token context leaves
    room for beside 8 new tokens."""
    rows = [{"prompt": f"{a}+{a}=", "answer": str(2 * a)} for a in range(100, 105)]
    rows[1]["prompt"] = rows[3]["prompt"] = "1+" * 40 + "1="
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_prompts_longer_than_the_context_are_refused_at_load_when_asked(tmp_path):
    data = long_rows(tmp_path / "rows.jsonl")
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={data}", "task.long_prompts=refuse")) == (
        f"flywheel: error: task.dataset '{data}' row 2 (and 1 more) has a prompt longer than the model's context leaves room for (56 tokens: "
        "max_position_embeddings minus rollout.max_new_tokens); shorten those rows, or set task.long_prompts=skip to leave them out"
    )


def test_a_dataset_whose_every_prompt_is_too_long_is_refused_at_load(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": "1+" * 40 + "1=", "answer": "41"}) + "\n" for _ in range(3)))
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={data}")) == (
        f"flywheel: error: every row of task.dataset '{data}' has a prompt longer than the model's context leaves room for (56 tokens: "
        "max_position_embeddings minus rollout.max_new_tokens), so nothing is left to train on; shorten the prompts or lower rollout.max_new_tokens"
    )


def test_prompts_longer_than_the_context_are_skipped_and_counted_by_default(tmp_path, capsys):
    from flywheel.config import load_config
    from flywheel.rollout.stream import load_tasks

    data, held_out = long_rows(tmp_path / "rows.jsonl"), long_rows(tmp_path / "held_out.jsonl")
    tasks = load_tasks(
        load_config(REPO / "configs/quickstart.yaml", [*DATASET, f"task.dataset={data}", f"task.eval_dataset={held_out}", "task.eval_size=5"])
    )
    assert [t.prompt for t in tasks.train] == ["100+100=", "102+102=", "104+104="] and tasks.long_prompts == 2
    assert [t.prompt for t in tasks.eval] == ["100+100=", "102+102=", "104+104="]
    assert capsys.readouterr().err == (
        "flywheel: skipped 2 train and 2 eval rows of task.dataset whose prompts are longer than the model's context leaves room for "
        "(56 tokens: max_position_embeddings minus rollout.max_new_tokens)\n"
    )


FAULTY = REPO / "tests/faulty_user_code.py"


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            [f"reward.functions=['{FAULTY}:returns_text']"],
            "reward.check_rows: reward function 'returns_text' must return a list of 2 floats or None, one per completion; it returned "
            "['1.0', '1.0'] (on the first 2 rows of task.dataset, their reference answers as the completions)",
        ),
        (
            [f"task.grader={FAULTY}:grader_raises"],
            f"reward.check_rows: task.grader '{FAULTY}:grader_raises' raised RuntimeError: the grader is broken (on row 1 of task.dataset, "
            "its reference answer as the answer)",
        ),
    ],
)
def test_check_rows_calls_the_functions_at_load(tmp_path, overrides, expected):
    data = long_rows(tmp_path / "rows.jsonl")
    assert one_sentence(cli(tmp_path, *DATASET, f"task.dataset={data}", "reward.check_rows=2", *overrides)) == f"flywheel: error: {expected}"


def test_check_rows_passes_functions_that_answer(tmp_path):
    from flywheel.envs.dataset import function_check_problem

    data = long_rows(tmp_path / "rows.jsonl")  # first digits 1: raises_on_some_prompts answers
    assert function_check_problem(3, [f"{FAULTY}:raises_on_some_prompts"], 5.0, str(data)) is None
    assert function_check_problem(3, [f"{FAULTY}:slow_on_some_prompts"], 0.5, str(data)) == (
        "reward.check_rows: reward function 'slow_on_some_prompts' did not return within 0.5 s (reward.function_timeout_s) "
        "(on the first 3 rows of task.dataset, their reference answers as the completions)"
    )
