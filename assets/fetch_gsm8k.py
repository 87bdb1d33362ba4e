"""Writes GSM8K's train and test splits as JSONL (question, answer) for configs/qwen2.5-0.5b-gsm8k.yaml.

    python assets/fetch_gsm8k.py data/gsm8k

Needs a network that reaches the Hugging Face Hub (the dataset 'openai/gsm8k', config 'main') and the
`datasets` package. flywheel never downloads at run time; the shipped assets/word-problems/ files have
the same columns and format for runs without a network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: str) -> None:
    from datasets import load_dataset

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = load_dataset("openai/gsm8k", "main", split=split)
        path = root / f"{split}.jsonl"
        path.write_text("".join(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n" for r in rows))
        print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/gsm8k")
