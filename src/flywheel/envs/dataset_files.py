"""Rows of a dataset file: JSON Lines (``.jsonl``, ``.json``), Parquet, CSV, or a directory written by
``datasets.Dataset.save_to_disk``.

``column_names`` reads only what names the columns (the first JSON line, the Parquet schema, the CSV
header, the directory's ``dataset_info.json``); ``read_rows`` reads every row as a dict of plain Python
values. Text files must be UTF-8: a byte that is not, a line that is not a JSON object, a CSV row with
more cells than the header, a Parquet file that is not one: one sentence naming the file and the line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
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
        first = next(((n, line) for n, line in _lines(path, key) if line.strip()), None)
        if first is None:
            raise DatasetFileError(f"{key} '{path}' is empty; it needs at least one row")
        return list(_json_row(first[1], path, first[0], key))
    if kind == "parquet":
        import pyarrow.parquet as pq

        return list(_parquet(path, key, pq.read_schema).names)
    if kind == "csv":
        header = next(_csv_rows(path, key), None)
        if not header:
            raise DatasetFileError(f"{key} '{path}' is empty; its first line must name the columns")
        return header[1]
    features = json.loads((path / "dataset_info.json").read_text()).get("features") or {}
    return list(features)


def read_rows(path: str | Path, key: str = "task.dataset") -> list[dict[str, Any]]:
    """Every row of the dataset, in file order."""
    kind, path = file_format(path, key), Path(path)
    if kind == "jsonl":
        return [_json_row(line, path, n, key) for n, line in _lines(path, key) if line.strip()]
    if kind == "parquet":
        import pyarrow.parquet as pq

        return _parquet(path, key, pq.read_table).to_pylist()
    if kind == "csv":
        rows = _csv_rows(path, key)
        header = next(rows, (1, []))[1]
        return [_csv_row(header, cells, path, n, key) for n, cells in rows if cells]  # blank lines hold no row
    try:
        from datasets import load_from_disk
    except ImportError:
        raise DatasetFileError(f"{key} '{path}' is a save_to_disk directory: install the datasets package (pip install datasets==4.6.1)") from None
    return load_from_disk(str(path)).to_list()


def _lines(path: Path, key: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a UTF-8 text file."""
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetFileError(
                    f"{key} '{path}' line {number} is not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1}); "
                    "give a UTF-8 text file (a binary file is not a dataset)"
                ) from None


def _csv_rows(path: Path, key: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each CSV record, the header first."""
    reader = csv.reader(line for _, line in _lines(path, key))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise DatasetFileError(f"{key} '{path}' line {reader.line_num} is not valid CSV ({error}); fix that line") from None
        yield reader.line_num, cells


def _csv_row(header: list[str], cells: list[str], path: Path, number: int, key: str) -> dict[str, Any]:
    if len(cells) > len(header):
        raise DatasetFileError(f"{key} '{path}' line {number} has {len(cells)} cells but the header names {len(header)} columns; fix that line")
    return dict(zip(header, [*cells, *[None] * (len(header) - len(cells))]))


def _parquet(path: Path, key: str, read: Callable[[Path], Any]) -> Any:
    import pyarrow

    try:
        return read(path)
    except (pyarrow.ArrowException, OSError) as error:
        raise DatasetFileError(
            f"{key} '{path}' cannot be read as Parquet ({error}); give a Parquet file, or another format by its extension"
        ) from None


def _json_row(line: str, path: Path, number: int, key: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DatasetFileError(f"{key} '{path}' line {number} is not valid JSON ({error.msg}); write one JSON object per line") from None
    if not isinstance(row, dict):
        raise DatasetFileError(f"{key} '{path}' line {number} is a {type(row).__name__}, not an object; write one JSON object per line")
    return row
