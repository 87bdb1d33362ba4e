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
