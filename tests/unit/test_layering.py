"""Every import in src/flywheel points down: a module imports only its own folder and the layers below it.

The layers, bottom up (DESIGN.md, "Layout"): the contracts (types, config, metrics, timeline, and preemption's
stop signals, which every MPI rank installs) import nothing of flywheel's; the seams and pure numerics (algorithms, weights, sandbox, engines) import the contracts; then
the trainer and the rewards; the environments (which score with rewards); the rollout tier; the cluster,
the one place that starts actors; evaluation and monitoring; and on top the entry points that assemble a run.
Lazy imports inside functions count as imports here: a cycle hidden in a function is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "flywheel"

LAYERS: list[set[str]] = [
    {"types", "config", "metrics", "timeline", "preemption"},
    {"algorithms", "weights", "sandbox", "engines"},
    {"trainer", "rewards"},
    {"envs"},
    {"rollout"},
    {"cluster"},
    {"eval", "monitor"},
    {"controller", "session", "supervisor", "preflight", "reward_check", "api", "cli", "dashboard", "__init__", "__main__"},
]
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """'flywheel.rollout.stream' -> 'rollout'; 'flywheel.controller' -> 'controller'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def flywheel_imports(path: Path) -> list[str]:
    """Every flywheel module ``path`` imports, at the top or inside a function."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("flywheel"):
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.startswith("flywheel")]
    return names


def upward_imports() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        here = relative.parts[0].removesuffix(".py")
        for module in flywheel_imports(path):
            there = unit_of(module)
            if there != here and LEVEL[there] > LEVEL[here]:
                found.append(f"{relative} imports {module} ({there} is above {here})")
    return found


def test_every_folder_has_a_layer():
    units = {p.name.removesuffix(".py") for p in SRC.iterdir() if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    assert units <= LEVEL.keys(), f"put {sorted(units - LEVEL.keys())} in a layer of tests/unit/test_layering.py"


def test_every_import_points_down():
    assert upward_imports() == []


def test_config_imports_no_implementation_and_no_torch():
    """The schemas load alone: importing flywheel.config pulls in no other flywheel folder and no torch."""
    import subprocess
    import sys

    code = "import sys, flywheel.config; print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('flywheel.')}), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["['config']", "False"]


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check itself can fail: a lazy import of the controller from a reward module is found."""
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from flywheel.controller import train\n    import flywheel.cluster.workers\n")
    assert flywheel_imports(module) == ["flywheel.controller", "flywheel.cluster.workers"]
    assert LEVEL[unit_of("flywheel.controller")] > LEVEL["rewards"] and LEVEL[unit_of("flywheel.cluster.workers")] > LEVEL["rewards"]


def test_no_two_folders_import_each_other():
    """Within a layer too: the folder graph has no cycle."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        here = path.relative_to(SRC).parts[0].removesuffix(".py")
        graph.setdefault(here, set()).update(unit_of(m) for m in flywheel_imports(path) if unit_of(m) != here)
    done: set[str] = set()

    def cycle_from(unit: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if unit in path:
            return (*path[path.index(unit) :], unit)
        if unit in done:
            return None
        for nxt in sorted(graph.get(unit, ())):
            if found := cycle_from(nxt, (*path, unit)):
                return found
        done.add(unit)
        return None

    cycles = [" -> ".join(c) for unit in sorted(graph) if (c := cycle_from(unit, ()))]
    assert cycles == []
