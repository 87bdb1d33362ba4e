"""The metric registry (flywheel.metrics) is well-formed, and every metric name written in src/ is in it."""

import ast
import re
from pathlib import Path

from flywheel.metrics import METRICS, NAMESPACES, is_registered, names, unregistered

SRC = Path(__file__).resolve().parents[2] / "src" / "flywheel"
#: DESIGN.md, principle 14
DESIGN_NAMESPACES = {"loss", "train", "rollout", "timing", "eval", "reward", "env", "hacking"}
#: a literal shaped like a metric name: ``word/word...``
NAME_LIKE = re.compile(r"[a-z_]+(/[A-Za-z0-9_]+)+")
#: literals of that shape that are not metric names: a MIME type, and the trainer's non-metric outputs
NOT_METRICS = {"application/json"}


def test_registry_is_well_formed():
    assert DESIGN_NAMESPACES <= set(NAMESPACES)
    assert {m.namespace for m in METRICS} == set(NAMESPACES)  # every name in a namespace, no namespace unused
    assert len(names()) == len(set(names()))
    for m in METRICS:
        assert re.fullmatch(r"[a-z]+(/[a-z_<>]+)+", m.name), m.name
        assert m.unit and m.description, m.name


def test_placeholders_match_one_word():
    assert is_registered("reward/judge/mean") and is_registered("reward/format_reward_func/mean")
    assert is_registered("hacking/exit_tricks_rate") and is_registered("hacking/any_rate")
    assert is_registered("eval/tools/call_rate") and is_registered("eval/add4/env/score/correct_answer")
    assert is_registered("eval/add4/accuracy") and is_registered("env/score/num_turns")
    assert unregistered(["reward/judge", "reward/a/b/mean", "train/entropyx", "eval/add4/reward/mean", "eval/a/b/accuracy", "hacking/"]) == {
        "reward/judge",
        "reward/a/b/mean",
        "train/entropyx",
        "eval/add4/reward/mean",
        "eval/a/b/accuracy",
        "hacking/",
    }


def template(node: ast.JoinedStr) -> str:
    """An f-string with each replacement field as ``<x>``."""
    return "".join(v.value if isinstance(v, ast.Constant) else "<x>" for v in node.values)


def written_names() -> tuple[set[str], set[str]]:
    """Metric-shaped string literals in src/ (the registry aside), and f-string templates that start with ``namespace/``."""
    literals, templates = set(), set()
    for path in set(SRC.rglob("*.py")) - {SRC / "metrics.py"}:
        tree = ast.parse(path.read_text())
        parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts and NAME_LIKE.fullmatch(node.value):
                literals.add(node.value)
            elif isinstance(node, ast.JoinedStr) and re.match(r"[a-z_]+/", template(node)):
                templates.add(template(node))
    return literals - NOT_METRICS, templates


def test_every_metric_name_in_src_is_registered():
    literals, templates = written_names()
    assert {"loss/policy", "train/mismatch_kl", "rollout/dropped_stale", "judge/parse_fail_rate"} <= literals  # the scan sees them
    assert {"hacking/<x>_rate", "timing/<x>", "env/score/<x>"} <= templates
    assert not unregistered(literals), unregistered(literals)
    # a template's fields may stand for anything: some registered name must fit it
    shapes = {t: re.compile("".join(".+" if p == "<x>" else re.escape(p) for p in re.split(r"(<x>)", t))) for t in templates}
    assert not [t for t, shape in shapes.items() if not any(shape.fullmatch(n) for n in names())]
