"""A timeline.jsonl as a Gantt chart: one self-contained SVG (no script, no external file), one lane per
actor, one bar per span coloured by stage, each bar's tooltip naming actor, stage, step and seconds.

    python -m flywheel.monitor.gantt runs/quickstart/timeline.jsonl > timeline.svg
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

from flywheel.timeline import Span, read_timeline

ACTOR_ORDER = ("controller", "trainer", "engine", "reward", "env")
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
LANE, LABEL, WIDTH, AXIS = 22, 110, 1200, 24


def lane_key(actor: str) -> tuple[int, str]:
    """Controller first, then trainer, engines (by index), reward, env; other actors last."""
    kind, _, index = actor.partition("-")
    rank = ACTOR_ORDER.index(kind) if kind in ACTOR_ORDER else len(ACTOR_ORDER)
    return rank, f"{kind}-{int(index):06d}" if index.isdigit() else actor


def render_gantt(spans: list[Span], width: int = WIDTH) -> str:
    """The SVG of ``spans`` (the time axis spans the earliest start to the latest end)."""
    actors = sorted({s.actor for s in spans}, key=lane_key)
    stages = sorted({s.stage for s in spans})
    colour = {stage: PALETTE[i % len(PALETTE)] for i, stage in enumerate(stages)}
    t0 = min((s.start_s for s in spans), default=0.0)
    t1 = max((s.end_s for s in spans), default=1.0)
    scale = (width - LABEL - 10) / max(t1 - t0, 1e-9)
    height = AXIS + LANE * len(actors) + LANE
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for tick in _ticks(t0, t1):
        x = LABEL + (tick - t0) * scale
        out.append(f'<line x1="{x:.1f}" y1="{AXIS - 4}" x2="{x:.1f}" y2="{height - LANE}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{AXIS - 8}" text-anchor="middle">{tick:g}s</text>')
    for lane, actor in enumerate(actors):
        y = AXIS + lane * LANE
        out.append(f'<text x="4" y="{y + LANE * 0.65:.1f}">{escape(actor)}</text>')
        for s in (s for s in spans if s.actor == actor):
            x, w = LABEL + (s.start_s - t0) * scale, max((s.end_s - s.start_s) * scale, 0.5)
            tip = f"{s.actor} {s.stage} step {s.step}: {s.start_s:.3f}-{s.end_s:.3f}s ({s.end_s - s.start_s:.3f}s)"
            out.append(
                f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{LANE - 6}" fill="{colour[s.stage]}" fill-opacity="0.8">'
                f"<title>{escape(tip)}</title></rect>"
            )
    x = LABEL
    for stage in stages:  # legend
        out.append(f'<rect x="{x}" y="{height - LANE + 6}" width="10" height="10" fill="{colour[stage]}"/>')
        out.append(f'<text x="{x + 14}" y="{height - LANE + 15}">{escape(stage)}</text>')
        x += 20 + 7 * len(stage)
    out.append("</svg>")
    return "\n".join(out)


def _ticks(t0: float, t1: float, count: int = 10) -> list[float]:
    """About ``count`` round tick positions between t0 and t1."""
    raw = max(t1 - t0, 1e-9) / count
    step = next(m * 10**e for e in range(-3, 7) for m in (1, 2, 5) if m * 10**e >= raw)
    first = -(-t0 // step) * step
    return [round(first + i * step, 6) for i in range(int((t1 - first) / step + 1e-9) + 1)]


if __name__ == "__main__":
    sys.stdout.write(render_gantt(read_timeline(Path(sys.argv[1]))) + "\n")
