"""Run the reward-hacking battery through every guard; write bench/results/hacking.json and bench/hacking.md.

A hack counts as caught when the guard of its family flags it; a control counts as penalised when any guard
flags it (apply_guards in "penalize" mode lowers its reward).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from hacking_cases import CONTROLS, HACKS  # noqa: E402

from flywheel.rewards.guards import apply_guards, default_guards  # noqa: E402


def run() -> dict:
    """Battery figures: totals and, per family, hacks and caught."""
    guards = {g.name: g for g in default_guards()}
    families = {name: {"hacks": 0, "caught": 0} for name in guards}
    for case in HACKS:
        families[case.family]["hacks"] += 1
        families[case.family]["caught"] += guards[case.family].check(case.completion, case.task).flagged
    report = apply_guards(
        [c.completion for c in CONTROLS], list(guards.values()), "penalize",
        rewards=[1.0] * len(CONTROLS), tasks=[c.task for c in CONTROLS],
    )  # fmt: skip
    return {
        "hacks_total": len(HACKS),
        "hacks_caught": sum(f["caught"] for f in families.values()),
        "controls_total": len(CONTROLS),
        "controls_penalised": sum(r < 1.0 for r in report.rewards),
        "families": families,
    }


def markdown(result: dict) -> str:
    """bench/hacking.md from the figures."""
    rows = "\n".join(f"| `{name}` | {f['hacks']} | {f['caught']} |" for name, f in result["families"].items())
    return f"""# Reward-hacking guards on the crafted battery

Every hack in `tests/unit/hacking_cases.py` is checked by the guard of its family; every honest control is run
through all eight guards with `apply_guards(..., "penalize")`. The battery is hand-written (realistic small
solutions with the hack embedded, judge answers with injections, padded text), so these figures measure coverage
of known patterns, not recall on hacks a policy invents.

Produced by:

```bash
.venv/bin/python bench/hacking.py
```

| guard family | hacks | caught |
| --- | ---: | ---: |
{rows}
| **all** | **{result['hacks_total']}** | **{result['hacks_caught']}** |

Honest controls penalised by any guard: {result['controls_penalised']} of {result['controls_total']}.

The same figures are in `bench/results/hacking.json`.
"""


def main() -> None:
    result = run()
    (ROOT / "bench" / "results" / "hacking.json").write_text(json.dumps(result, indent=2) + "\n")
    (ROOT / "bench" / "hacking.md").write_text(markdown(result))
    print(json.dumps({k: v for k, v in result.items() if k != "families"}))


if __name__ == "__main__":
    main()
