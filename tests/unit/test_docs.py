"""The docs stay true to the code: the generated reference pages equal a fresh generation (rerun
`.venv/bin/python docs/gen_reference.py` after changing a config schema or the metric registry), and the
README stays a front page (the depth lives in docs/, which `make docs` builds with --strict)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_reference_pages_are_current():
    pages = generator().generate()
    assert sorted(p.relative_to(ROOT).as_posix() for p in pages) == ["docs/reference/config.md", "docs/reference/metrics.md"]
    stale = [p.relative_to(ROOT).as_posix() for p, text in pages.items() if not p.exists() or p.read_text() != text]
    assert not stale, f"{stale} differ from a fresh generation: run .venv/bin/python docs/gen_reference.py"


def test_reference_pages_hold_every_key_and_metric():
    from flywheel.config import Config
    from flywheel.metrics import METRICS

    pages = generator().generate()
    config, metrics = (pages[ROOT / "docs" / "reference" / name].splitlines() for name in ("config.md", "metrics.md"))
    assert sum(line.startswith("| `trainer.lr` | `float` | `0.0002` |") for line in config) == 1
    assert sum(line.startswith("### `algorithm.name: ") for line in config) == 10  # a section per algorithm
    assert sum(line.startswith("| `algorithm.clip_high` |") for line in config) == 10  # every algorithm has one
    assert {f"## `{name}`" for name in Config.model_fields} <= set(config)
    assert [line.split("`")[1] for line in metrics if line.startswith("| `")] == [m.name for m in METRICS]


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
