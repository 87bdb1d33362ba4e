"""Dataset files as the ecosystem writes them: JSON Lines, Parquet (pyarrow), CSV, and datasets' save_to_disk."""

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset, DatasetDict

from flywheel.envs.dataset_files import DatasetFileError, column_names, read_rows

ROWS = [
    {"question": "What is 2+3?", "answer": "#### 5", "level": 1},
    {"question": "What is 4*4?", "answer": "#### 16", "level": 2},
]
CHAT = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "answer": "4"}]


def write(path, rows):
    """rows in the format path's extension (or a save_to_disk directory when it has none) names."""
    if path.suffix in (".jsonl", ".json"):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        Dataset.from_list(rows).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json", "rows.parquet", "saved"])
def test_typed_formats_read_back_the_rows(tmp_path, name):
    path = write(tmp_path / name, ROWS)
    assert column_names(path) == ["question", "answer", "level"]
    assert read_rows(path) == ROWS


def test_csv_reads_text(tmp_path):
    path = write(tmp_path / "rows.csv", ROWS)
    assert column_names(path) == ["question", "answer", "level"]
    assert read_rows(path) == [{**r, "level": str(r["level"])} for r in ROWS]  # CSV cells are text


@pytest.mark.parametrize("name", ["chat.jsonl", "chat.parquet", "chat-saved"])
def test_chat_messages_survive_every_typed_format(tmp_path, name):
    assert read_rows(write(tmp_path / name, CHAT)) == CHAT


def test_column_names_read_only_the_first_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\nnot json\n")
    assert column_names(path) == ["question", "answer", "level"]
    with pytest.raises(
        DatasetFileError, match=r"task.dataset '.*rows.jsonl' line 2 is not valid JSON \(Expecting value\); write one JSON object per line"
    ):
        read_rows(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.jsonl", "does not exist; give the path of a JSONL, Parquet or CSV file or a save_to_disk directory"),
        (lambda p: (p / "rows.txt").write_text("x") and p / "rows.txt", "has an unknown extension"),
        (lambda p: (p / "empty.jsonl").write_text("\n") and p / "empty.jsonl", "is empty; it needs at least one row"),
        (lambda p: (p / "list.jsonl").write_text("[1, 2]\n") and p / "list.jsonl", "line 1 is a list, not an object; write one JSON object per line"),
        (
            lambda p: (p / "plain").mkdir() or p / "plain",
            "is a directory without dataset_info.json; give a directory written by datasets' save_to_disk",
        ),
    ],
)
def test_unreadable_datasets_are_one_sentence(tmp_path, make, message):
    with pytest.raises(DatasetFileError) as error:
        column_names(make(tmp_path))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_dataset_dict_names_its_splits(tmp_path):
    DatasetDict({"train": Dataset.from_list(ROWS), "test": Dataset.from_list(ROWS)}).save_to_disk(str(tmp_path / "gsm"))
    with pytest.raises(
        DatasetFileError, match=r"holds a DatasetDict \(splits: train, test\); point task.dataset at one split's directory, e.g. '.*gsm/train'"
    ):
        column_names(tmp_path / "gsm")
    assert read_rows(tmp_path / "gsm" / "train") == ROWS
