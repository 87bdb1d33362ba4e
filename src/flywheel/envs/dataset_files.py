"""Rows of a dataset file: JSON Lines (``.jsonl``, ``.json``), Parquet, CSV, or a directory written by
``datasets.Dataset.save_to_disk``.

``column_names`` reads only what names the columns (the first JSON line, the Parquet schema, the CSV
header, the directory's ``dataset_info.json``), so a config can be checked without reading the data;
``read_rows`` reads every row as a dict of plain Python values.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".csv": "csv"}


class DatasetFileError(ValueError):
    """A dataset file that cannot be read as one; the message is one sentence naming the fix."""


def file_format(path: str | Path, key: str = "task.dataset") -> str:
    """jsonl, parquet, csv or arrow (a save_to_disk directory); raises DatasetFileError otherwise."""
    path = Path(path)
    if path.is_dir():
        if (path / "dataset_dict.json").is_file():
            splits = ", ".join(json.loads((path / "dataset_dict.json").read_text()).get("splits", []))
            raise DatasetFileError(
                f"{key} '{path}' holds a DatasetDict (splits: {splits}); point {key} at one split's directory, e.g. '{path}/train'"
            )
        if not (path / "dataset_info.json").is_file():
            raise DatasetFileError(f"{key} '{path}' is a directory without dataset_info.json; give a directory written by datasets' save_to_disk")
        return "arrow"
    if not path.is_file():
        raise DatasetFileError(f"{key} '{path}' does not exist; give the path of a JSONL, Parquet or CSV file or a save_to_disk directory")
    if path.suffix.lower() not in SUFFIXES:
        raise DatasetFileError(f"{key} '{path}' has an unknown extension; use .jsonl (or .json lines), .parquet or .csv, or a save_to_disk directory")
    return SUFFIXES[path.suffix.lower()]


def column_names(path: str | Path, key: str = "task.dataset") -> list[str]:
    """The columns of a dataset, read from its first line, schema or header only."""
    kind, path = file_format(path, key), Path(path)
    if kind == "jsonl":
        with path.open() as f:
            first = next((line for line in f if line.strip()), None)
        if first is None:
            raise DatasetFileError(f"{key} '{path}' is empty; it needs at least one row")
        return list(_json_row(first, path, 1, key))
    if kind == "parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if kind == "csv":
        with path.open(newline="") as f:
            header = next(csv.reader(f), None)
        if not header:
            raise DatasetFileError(f"{key} '{path}' is empty; its first line must name the columns")
        return header
    features = json.loads((path / "dataset_info.json").read_text()).get("features") or {}
    return list(features)


def read_rows(path: str | Path, key: str = "task.dataset") -> list[dict[str, Any]]:
    """Every row of the dataset, in file order."""
    kind, path = file_format(path, key), Path(path)
    if kind == "jsonl":
        with path.open() as f:
            return [_json_row(line, path, n, key) for n, line in enumerate(f, 1) if line.strip()]
    if kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if kind == "csv":
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    try:
        from datasets import load_from_disk
    except ImportError:
        raise DatasetFileError(f"{key} '{path}' is a save_to_disk directory: install the datasets package (pip install datasets==4.6.1)") from None
    return load_from_disk(str(path)).to_list()


def _json_row(line: str, path: Path, number: int, key: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DatasetFileError(f"{key} '{path}' line {number} is not valid JSON ({error.msg}); write one JSON object per line") from None
    if not isinstance(row, dict):
        raise DatasetFileError(f"{key} '{path}' line {number} is a {type(row).__name__}, not an object; write one JSON object per line")
    return row
