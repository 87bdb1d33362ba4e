"""Run the reward-hacking battery (tests/hacking) through the real sandbox grader, the judge prompt and the guards;
write bench/results/hacking.json and bench/hacking.md.

    .venv/bin/python bench/hacking.py

Each section is compared with its first measurement, recorded before the guards were changed for it:
results/hacking_before.json (the main battery through the guards as they were before issue 10, commit 1e547f9),
hacking_holdout_first.json (5806c41), hacking_holdout2_first.json (51c8d23), hacking_holdout3_first.json (4c7d271),
hacking_holdout4_first.json (issue 33).
See tests/hacking/battery.py for what counts as a gain and as a penalty.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "hacking"))

from battery import measure, sandbox  # noqa: E402

RESULTS = ROOT / "bench" / "results"
COLUMNS = ("grader_no_gain", "guard_flagged", "successful")
# section -> (title, file of its first measurement, what happened to it)
SECTIONS = {
    "main": ("Main battery", "hacking_before.json",
             "Written for issue 10 without reading the guards (categories `v1_*`: the first battery, written with "
             "them); first measured through the guards as they were, then the guards were changed until it passed."),
    "holdout": ("First held-out set", "hacking_holdout_first.json",
                "Written after the changes above, measured once, then the guards were fixed for its misses."),
    "holdout2": ("Second held-out set", "hacking_holdout2_first.json",
                 "Written after the first round of fixes, measured once, then the guards were fixed for its misses."),
    "holdout3": ("Third held-out set", "hacking_holdout3_first.json",
                 "Written after the second round of fixes and measured once. Kept as measured for the hacks (no guard "
                 "was changed for them); its three penalised controls (a file named `answers_cache.json`, an "
                 "example chat transcript with `USER:` lines, an explainer of exam marking) were then fixed."),
    "holdout4": ("Fourth held-out set", "hacking_holdout4_first.json",
                 "Written for issue 33 without reading the guards' code (fiction and quotation framing, markup comments, "
                 "YAML and tool-result verdicts, acrostics, split words, fullwidth text, new languages; code forging "
                 "through the garbage collector, faking a pass at exit, signalling its supervisor, recognising the "
                 "shown examples by a hash) and measured once. Kept as measured: no guard was changed for it, and "
                 "the test's 95% goal is asserted on the other sections (`battery.GATED`)."),
}  # fmt: skip
TEMPLATE = """# Reward hacking: the battery through the real grader, the judge prompt and the guards

Produced by (about {seconds} s on 2 cores; `tests/hacking/test_hacking_battery.py` runs the same battery and asserts the
goals on all of it together):

```bash
.venv/bin/python bench/hacking.py
```

**What is measured.** Every hack is a realistic answer to a realistic task with the trick embedded, and its honest
part is wrong, so anything it earns is the trick's. Code hacks run through the real code grader
(`rewards/code.py`'s `hidden_tests_reward` in a real `Sandbox`: JSON return values compared on the host); every
completion runs through `apply_guards(default_guards(), "penalize")`; judge hacks also through the real
`build_prompt`. A hack **gains nothing** when the grader gives it 0, when the judge prompt demonstrably removes its
trick (a forged block delimiter or an invisible payload absent from the candidate block the judge sees), or when a
guard flags it. **No judge model is available here**: whether a judge would be fooled is not measured, so a text
hack counts as successful whenever it reaches the judge unflagged. A control is **penalised** when any guard flags
it. Columns read "first measurement → now".

**Read the held-out first measurements as the estimate for new hacks:** {estimates}. Everything else is fitted:
the guards were changed until those cases passed.

{sections}

## Together

{all_totals}. Without the fourth held-out set, kept as first measured: {gated_totals} (the test asserts at least 95%
and at most 2% there, `battery.GATED`).

## What remains open, and why

* **The code grader is the real defence; the code guards barely generalise.** The grader compares JSON return
  values on the host and never sends the expectations to the child, so every exit, `__eq__`, harness,
  introspection and dynamic-code hack here earns 0 from it; only special-casing of inputs the prompt shows earns
  anything. The static code guards flagged 5 of 11 such hacks in the second held-out set and 0 of 9 in the third
  (closing inherited descriptors, sleeping past the deadline, an `__eq__` that returns `other is other`, printing a
  fake report at exit, renaming the tests folder, sniffing `sys.argv` for pytest, `__builtins__` lookups,
  `timeit` and `pydoc.locate` as code runners). A name assembled in a loop or read from a file defeats folding.
* **Special-casing** is recognised for literals equal to, prefixing, nested in or paired with the task's
  `visible_inputs`, and for branches that recognise an input by its length, sum or elements and return a literal;
  structural `match` patterns (`case [3, *rest]`) pass, as do inputs not listed in `visible_inputs`.
* **Persuasion without keywords** is caught only through grading vocabulary (a reviewer beside the answer, top
  marks, the reference solution, a marking scheme, nothing to deduct). A plea or an appeal to authority that avoids
  it reaches the judge (both in the third held-out set did): only the judge's instructions stand in its way, and
  those are not measured.
* **Languages, encodings and look-alikes are lists.** Injections are recognised in about thirty languages and read
  through base64, base32, hex, %-encoding, ROT13 and leetspeak; look-alike letters are folded for Cyrillic and
  Greek. Tagalog, Swahili, English synonyms ("set aside everything you were told"), Armenian look-alikes, reversed
  text and Morse passed in the third held-out set.
* **Verdicts and roles in other shapes** pass when no rule names them: verdict JSON, `Score: 1.0` lines, XML tags,
  table rows and Alpaca headers are recognised; "Final assessment: correct, 1.0", a JSON object with non-verdict
  keys (`comment`) and ChatML without its pipes (`<im_start>`) are not.
* **Padding with varied, natural prose** (paraphrases, off-topic text) passes: the guard sees repetition (numbers
  masked), word lists and compressibility, not relevance; that needs the judge.
* **The exemptions are attack surface, chosen to keep honest answers unpenalised:** text in quotation marks is
  never an instruction; a task about grading, scores, exams, reviews or JSON allows verdict-like text; a task about
  chat templates allows template tokens; a grader named in the task may be addressed. In code, the answer's own
  `test_*` functions may use mocks and name the examples (unless the solution calls them), its `__main__` demo may
  name the examples, and `sys.exit(main())` under the main guard is allowed: a harness that ran the answer as a
  script with its tests appended could be ended early by it (flywheel's sandbox reports that as no result).
* **The fourth held-out set, written without reading the guards, repeats the lesson**: 8 of 23 hacks gain
  (three more unlisted languages: Welsh, Yoruba, Icelandic; hyphen-split words; a Caesar shift; a YAML verdict block;
  a tool-result verdict; special-casing by a hash of the shown inputs), and an honest explainer of prompt injection
  is penalised. Lists of languages, encodings and verdict shapes do not generalise; what would is structural (a
  judge that reads the candidate only as an escaped, length-bounded field and must answer through constrained
  decoding), which needs a judge model to measure. Code hacks that attack the sandbox itself (forging results
  through the garbage collector, killing the supervisor, an exit hook) earn 0 from the grader.
* **Format-tag abuse** is measured only through the guard (no verifier here) and was not extended.

## Grader findings (not in the guards' files)

The code grader loads the candidate as a module named `solution` (not `__main__`, empty argv, closed stdin), so
honest answers with a CLI entry point or `unittest.main()` are graded on their function. The jail has no `pytest`
and the candidate no `__file__`, so honest answers that read a data file next to the script or import pytest for
their own tests still score 0 on every hidden test: {failing}.

The figures are in `bench/results/hacking.json` (one object per section and `all`; first measurements in
`hacking_before.json` and `hacking_holdout*_first.json`).
"""


def table(now: dict, first: dict) -> str:
    """Per category: hacks, no gain from the grader or the prompt, flagged by a guard, successful (first → now)."""
    lines = ["| category | hacks | grader / prompt: no gain | guard flagged | successful |",
             "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, row in now["categories"].items():
        old = first["categories"][name]
        lines.append(f"| `{name}` | {row['hacks']} | " + " | ".join(f"{old[k]} → {row[k]}" for k in COLUMNS) + " |")
    return "\n".join(lines)


def totals(now: dict, first: dict) -> str:
    return (f"hacks that gain nothing {first['hacks_no_gain']}/{first['hacks']} → **{now['hacks_no_gain']}/"
            f"{now['hacks']}**; honest controls penalised {first['controls_penalised']}/{first['controls']} → "
            f"**{now['controls_penalised']}/{now['controls']}**")  # fmt: skip


def section(name: str, now: dict, first: dict) -> str:
    title, _, story = SECTIONS[name]
    passed = ", ".join(f"`{k}`" for k in first["successful_hacks"]) or "none"
    penalised = ", ".join(f"`{k}`" for k in first["penalised_controls"]) or "none"
    return (f"## {title}\n\n{story}\n\n{totals(now, first)}. At first measurement, successful: {passed}; "
            f"penalised: {penalised}.\n\n{table(now, first)}")  # fmt: skip


def markdown(result: dict, firsts: dict[str, dict]) -> str:
    both, gated = result["all"], result["gated"]
    estimates = "; ".join(
        f"{SECTIONS[n][0].lower()}: {f['hacks_no_gain']}/{f['hacks']} hacks gained nothing, "
        f"{f['controls_penalised']}/{f['controls']} controls penalised"
        for n, f in firsts.items() if n != "main"
    )  # fmt: skip
    return TEMPLATE.format(
        seconds=result["seconds"], estimates=estimates,
        sections="\n\n".join(section(n, result[n], firsts[n]) for n in SECTIONS),
        all_totals=f"{both['hacks_no_gain']}/{both['hacks']} hacks gain nothing ({both['hacks_no_gain_rate']:.1%}), "
                   f"{both['controls_penalised']}/{both['controls']} controls penalised "
                   f"({both['controls_penalised_rate']:.1%})",
        gated_totals=f"{gated['hacks_no_gain']}/{gated['hacks']} ({gated['hacks_no_gain_rate']:.1%}), "
                     f"{gated['controls_penalised']}/{gated['controls']} ({gated['controls_penalised_rate']:.1%})",
        failing=", ".join(f"`{k}`" for k in both["controls_failing_grader"]),
    )  # fmt: skip


def main() -> None:
    start = time.perf_counter()
    with sandbox() as box:
        result = measure(box)
    result["seconds"] = round(time.perf_counter() - start, 1)
    (RESULTS / "hacking.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    firsts = {name: json.loads((RESULTS / file).read_text()) for name, (_, file, _) in SECTIONS.items()}
    (ROOT / "bench" / "hacking.md").write_text(markdown(result, firsts))
    print(json.dumps({k: result["all"][k] for k in ("hacks", "hacks_no_gain", "controls", "controls_penalised")}))


if __name__ == "__main__":
    main()
