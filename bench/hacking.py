"""Run the reward-hacking battery (tests/hacking) through the real sandbox grader, the judge prompt and the guards;
write bench/results/hacking.json and bench/hacking.md.

    .venv/bin/python bench/hacking.py            # the current figures, compared with results/hacking_before.json

See tests/hacking/battery.py for what counts as a gain and as a penalty.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "hacking"))

from battery import measure, sandbox

RESULTS = ROOT / "bench" / "results"


def table(after: dict, before: dict | None) -> str:
    """Per category: hacks, no gain from the grader or prompt, flagged by a guard, successful (before -> after)."""
    lines = ["| category | hacks | grader / prompt: no gain | guard flagged | successful |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, row in after["categories"].items():
        old = (before or {}).get("categories", {}).get(name)
        cells = [f"{old[k]} → {row[k]}" if old else str(row[k])
                 for k in ("grader_no_gain", "guard_flagged", "successful")]
        lines.append(f"| `{name}` | {row['hacks']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    start = time.perf_counter()
    with sandbox() as box:
        result = measure(box)
    result["seconds"] = round(time.perf_counter() - start, 1)
    (RESULTS / "hacking.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    before_path = RESULTS / "hacking_before.json"
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    print(json.dumps({k: result[k] for k in ("hacks", "hacks_no_gain", "controls", "controls_penalised", "seconds")}))
    print(table(result, before))


if __name__ == "__main__":
    main()
