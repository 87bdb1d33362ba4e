"""The timeline recorder (spans, a resumed run's clock, off), a group's environment time between its
generate calls, and the Gantt chart's lanes, bars and ticks."""

import asyncio
import time
import xml.etree.ElementTree as ET

from flywheel.monitor.gantt import _ticks, lane_key, render_gantt
from flywheel.rollout.clock import GroupClock
from flywheel.timeline import Span, Timeline, read_timeline

SVG = "{http://www.w3.org/2000/svg}"


def test_spans_are_seconds_since_the_start_and_a_resume_continues_the_clock(tmp_path):
    path = tmp_path / "timeline.jsonl"
    timeline = Timeline(path)
    timeline.step = 3
    with timeline.span("controller", "train"):
        time.sleep(0.05)
    timeline.add("trainer", "forward", timeline.started + 1.0, timeline.started + 1.5, step=2)
    timeline.close()
    [train, forward] = read_timeline(path)
    assert (train.actor, train.stage, train.step) == ("controller", "train", 3)
    assert 0 <= train.start_s < 0.05 <= train.end_s - train.start_s < 1.0
    assert forward == Span("trainer", "forward", 2, 1.0, 1.5)

    resumed = Timeline(path)  # the last span ended at 1.5 s: the clock goes on from there
    with resumed.span("controller", "eval"):
        pass
    resumed.close()
    assert read_timeline(path)[-1].start_s >= 1.5


def test_a_timeline_without_a_path_records_nothing(tmp_path):
    timeline = Timeline(None)
    with timeline.span("controller", "train"):
        pass
    timeline.add("env", "steps", 0.0, 1.0)
    assert not timeline.enabled and list(tmp_path.iterdir()) == []


class SleepyEngine:
    """Generates nothing, taking ``seconds`` per call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def generate(self, prompts, n, temperature, max_tokens, seed, stop=None, schema=None):
        await asyncio.sleep(self.seconds)
        return [[] for _ in prompts]


def test_a_groups_environment_time_is_the_gaps_between_its_generate_calls():
    async def two_turns(clock: GroupClock) -> float:
        await clock.generate([[1]], 1, 1.0, 4, 0)
        await asyncio.sleep(0.05)  # the environments' turn
        await clock.generate([[1]], 1, 1.0, 4, 1)
        await asyncio.sleep(0.03)
        return time.time()

    clock = GroupClock(SleepyEngine(0.02))
    end = asyncio.run(two_turns(clock))
    gaps = clock.gaps(end)
    assert len(clock.calls) == 2 and [round(b - a, 1) for a, b in clock.calls] == [0.0, 0.0]
    assert gaps[0] == (clock.calls[0][1], clock.calls[1][0]) and gaps[1] == (clock.calls[1][1], end)
    assert 0.05 <= gaps[0][1] - gaps[0][0] < 0.5 and 0.03 <= gaps[1][1] - gaps[1][0] < 0.5


def test_the_gantt_chart_has_a_lane_per_actor_and_a_bar_per_span():
    spans = [
        Span("env", "steps", 1, 0.2, 0.4),
        Span("engine-10", "generate", 1, 0.0, 0.2),
        Span("engine-2", "generate", 1, 0.0, 0.3),
        Span("controller", "wait_for_batch", 1, 0.0, 0.5),
        Span("trainer", "forward", 1, 0.6, 0.7),
        Span("controller", "train", 1, 0.5, 1.0),
    ]
    svg = ET.fromstring(render_gantt(spans, width=1120))
    lanes = [e.text for e in svg.iter(f"{SVG}text") if e.get("x") == "4"]
    assert lanes == ["controller", "trainer", "engine-2", "engine-10", "env"]
    bars = [e for e in svg.iter(f"{SVG}rect") if e.find(f"{SVG}title") is not None]
    assert len(bars) == len(spans)
    train = next(b for b in bars if b.find(f"{SVG}title").text.startswith("controller train"))
    # 1000 px for 1 s after the 110 px label column: train runs 0.5-1.0 s
    assert (float(train.get("x")), float(train.get("width"))) == (610.0, 500.0)
    assert train.find(f"{SVG}title").text == "controller train step 1: 0.500-1.000s (0.500s)"
    assert lane_key("other") > lane_key("env-3") > lane_key("engine-1")
    assert _ticks(0.0, 1.0) == [round(0.1 * i, 6) for i in range(11)] and _ticks(3.0, 47.0) == [5.0 * i for i in range(1, 10)]
