"""The dashboard end to end: the server on run directories, the page in headless Chromium, and what it
drew checked against the files the runs wrote (curves, trajectories, timeline, alerts); a screenshot of
each page goes under the test's tmp directory (its path is printed).

Two real short runs (different seeds, overlaid), then a hand-made run with what a short arithmetic run
does not produce: multi-turn episodes with environment tokens, guard flags, non-finite metrics, alerts.
"""

import json
import math
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from dashboard_browser import attrs, background, choose, chromium, open_page, screenshot, served, settle
from helpers import SYNC

from flywheel.config import load_config
from flywheel.controller import train
from flywheel.dashboard.run_files import read_jsonl

REPO = Path(__file__).resolve().parents[2]
ADVANTAGE_COLOURS = {True: (0, 150, 60), False: (215, 40, 40)}  # dashboard.js TOKEN_COLOURS.adv: positive, negative
GAP_COLOURS = {True: (40, 100, 230), False: (230, 130, 0)}  # TOKEN_COLOURS.gap


def number(value) -> float:
    """A value as metrics.jsonl or the page writes it ("nan" and "inf" as strings) as a float."""
    return float(value)


def same(a: list, b: list) -> bool:
    """Equal lists of numbers, NaN equal to NaN."""
    return len(a) == len(b) and all(number(x) == number(y) or (math.isnan(number(x)) and math.isnan(number(y))) for x, y in zip(a, b))


def check_curves(driver, runs: dict[str, Path], metric: str) -> None:
    """Every metric name of every run is offered under its namespace; ``metric``'s chart shows each run's
    values at its steps and at its wall-clock seconds."""
    rows = {name: read_jsonl(d / "metrics.jsonl") for name, d in runs.items()}
    offered = driver.execute_script(
        "return [...document.querySelectorAll('#picker input[data-metric]')].map(el => [el.dataset.metric, el.closest('details').dataset.group])"
    )
    names = {key for rs in rows.values() for row in rs for key in row} - {"step"}
    assert sorted(offered) == sorted([name, name.split("/")[0]] for name in names)
    if not driver.find_element("css selector", f'#picker input[data-metric="{metric}"]').is_selected():
        driver.find_element("css selector", f'#picker input[data-metric="{metric}"]').click()
        settle(driver)
    for name, rs in rows.items():
        want = [row for row in rs if metric in row]
        points = attrs(driver, f'figure[data-metric="{metric}"] g.series[data-run="{name}"] .pt', "data-step", "data-value", "title")
        assert [int(p["data-step"]) for p in points] == [row["step"] for row in want]
        assert same([p["data-value"] for p in points], [row[metric] for row in want])
        assert same([points[-1]["title"].rsplit(" = ", 1)[1]], [want[-1][metric]])  # the hover text of the last point
    driver.find_element("css selector", "input[name=xaxis][value=time]").click()
    settle(driver)
    for name, rs in rows.items():
        points = attrs(driver, f'figure[data-metric="{metric}"] g.series[data-run="{name}"] .pt', "data-x")
        want = [row.get("timing/elapsed_s", 0.0) for row in rs if metric in row]  # step 0 (no elapsed time yet) at 0
        assert [float(p["data-x"]) for p in points] == want
    driver.find_element("css selector", "input[name=xaxis][value=step]").click()
    settle(driver)


def shown_token(token: str) -> str:
    return "∅" if token == "" else token.replace("\n", "↵\n")


def check_trajectories(driver, name: str, run: Path) -> None:
    """The dumped steps are offered; a token's colour and hover text are its advantage (then its trainer -
    engine logprob gap) from the Parquet file; the filters keep the episodes they should; two steps show
    the prompts they share side by side."""
    steps = sorted(int(p.stem.removeprefix("step_")) for p in (run / "rollouts").glob("step_*.parquet"))
    choose(driver, "#traj-run", name)
    assert [o["value"] for o in attrs(driver, "#traj-step option", "value")] == [str(s) for s in steps]
    step = steps[-1]  # the newest is shown first
    episodes = pq.read_table(run / f"rollouts/step_{step:06d}.parquet").to_pylist()
    tokens = [(e, i) for e in episodes for i, mask in enumerate(e["loss_mask"]) if mask]
    scale = max(abs(e["advantages"][i]) for e, i in tokens) or 1  # the page's full colour (1 when every advantage is 0)
    assert float(attrs(driver, "#token-scale", "data-scale")[0]["data-scale"]) == scale
    first = min(episodes, key=lambda e: e["position"])  # its group is drawn first
    e, i = next(((e, i) for e, i in tokens if e["position"] == first["position"] and e["advantages"][i] != 0), tokens[0])
    episode = f'.episode[data-position="{e["position"]}"][data-index="{e["index"]}"]'
    token = f'{episode} .tok[data-i="{i}"]'
    assert len(attrs(driver, f"{episode} .tok", "data-i")) == len(e["completion_ids"])
    assert driver.find_element("css selector", token).get_attribute("textContent") == shown_token(e["completion_tokens"][i])
    [drawn] = attrs(driver, token, "data-adv", "title")
    assert float(drawn["data-adv"]) == e["advantages"][i]
    assert float(re.search(r"advantage (\S+)", drawn["title"]).group(1)) == e["advantages"][i]
    *rgb, alpha = background(driver, token)
    assert tuple(rgb) == ADVANTAGE_COLOURS[e["advantages"][i] >= 0]
    assert abs(alpha - min(1.0, abs(e["advantages"][i]) / scale)) < 0.01
    driver.find_element("css selector", "input[name=colour][value=gap]").click()
    settle(driver)
    gap = e["trainer_logprobs"][i] - e["engine_logprobs"][i]
    assert float(attrs(driver, token, "data-gap")[0]["data-gap"]) == gap
    gap_scale = max(abs(e["trainer_logprobs"][i] - e["engine_logprobs"][i]) for e, i in tokens)
    assert float(attrs(driver, "#token-scale", "data-scale")[0]["data-scale"]) == (gap_scale or 1)
    *rgb, alpha = background(driver, token)
    assert tuple(rgb) == GAP_COLOURS[gap >= 0] and abs(alpha - min(1.0, abs(gap) / (gap_scale or 1))) < 0.01
    driver.find_element("css selector", "input[name=colour][value=adv]").click()
    settle(driver)

    def shown() -> list[tuple[int, int]]:
        return sorted((int(a["data-position"]), int(a["data-index"])) for a in attrs(driver, ".episode", "data-position", "data-index"))

    def keys(kept) -> list[tuple[int, int]]:
        return sorted((e["position"], e["index"]) for e in kept)

    assert shown() == keys(episodes)
    best = max(e["reward"] for e in episodes)
    choose(driver, "#f-rmin", best)
    assert shown() == keys(e for e in episodes if e["reward"] >= best)
    choose(driver, "#f-rmin", "")
    env = episodes[0]["env"]
    choose(driver, "#f-env", env)
    assert shown() == keys(e for e in episodes if e["env"] == env)
    choose(driver, "#f-env", "")
    choose(driver, "#f-guard", "__any")
    assert shown() == keys(e for e in episodes if e["guard_flags"])
    for flag in sorted({f for e in episodes for f in e["guard_flags"]}):
        choose(driver, "#f-guard", flag)
        assert shown() == keys(e for e in episodes if flag in e["guard_flags"])
    choose(driver, "#f-guard", "")

    prompts = {s: [e["prompt"] for e in pq.read_table(run / f"rollouts/step_{s:06d}.parquet").to_pylist()] for s in steps}
    other = max(steps[:-1], key=lambda s: len(set(prompts[s]) & set(prompts[step])))
    shared = [p for p in dict.fromkeys(e["prompt"] for e in sorted(episodes, key=lambda e: e["position"])) if p in prompts[other]]
    assert shared, f"steps {steps} share no prompt: the run's config should repeat its prompts"
    choose(driver, "#traj-compare", other)
    pairs = driver.execute_script(
        "return [...document.querySelectorAll('.pair')].map(pair => [...pair.querySelectorAll('.side')].map(side =>"
        " [side.dataset.step, [...new Set([...side.querySelectorAll('.prompt')].map(p => p.textContent))], side.querySelectorAll('.episode').length]))"
    )
    assert pairs == [[[str(step), [p], prompts[step].count(p)], [str(other), [p], prompts[other].count(p)]] for p in shared[:10]]
    choose(driver, "#traj-compare", "")


def check_timeline(driver, name: str, run: Path) -> None:
    """One bar per span of timeline.jsonl, on its actor's row."""
    spans = read_jsonl(run / "timeline.jsonl")
    choose(driver, "#tl-run", name)
    bars = attrs(driver, "#gantt rect.span", "data-actor", "data-stage", "data-step", "data-start", "data-end")
    assert len(bars) == len(spans)
    drawn = sorted((b["data-actor"], b["data-stage"], int(b["data-step"]), float(b["data-start"]), float(b["data-end"])) for b in bars)
    assert drawn == sorted((s["actor"], s["stage"], s["step"], s["start_s"], s["end_s"]) for s in spans)
    labels = driver.execute_script("return [...document.querySelectorAll('#gantt text.label')].map(t => t.textContent)")
    assert sorted(labels) == sorted({s["actor"] for s in spans})
    assert {a["data-stage"] for a in attrs(driver, "#stage-table tr[data-stage]", "data-stage")} == {s["stage"] for s in spans}


def check_alerts(driver, runs: dict[str, Path], metric: str) -> None:
    """Every alert of every run is a row of the alerts table and a mark on ``metric``'s chart (whose steps span the alerts')."""
    want = [(name, a["step"], a["kind"]) for name, d in runs.items() for a in read_jsonl(d / "alerts.jsonl")]
    rows = attrs(driver, "#alert-table tr.alert", "data-run", "data-step", "data-kind")
    assert [(r["data-run"], int(r["data-step"]), r["data-kind"]) for r in rows] == want
    assert driver.find_element("id", "alert-count").text == str(len(want))
    marks = attrs(driver, f'figure[data-metric="{metric}"] line.alert-mark', "title")
    assert sorted(m["title"].split(":")[0] for m in marks) == sorted(f"{name} · alert at step {step}" for name, step, _ in want)


def test_dashboard_of_real_runs(fresh_workers, tmp_path):
    root = tmp_path / "runs"
    runs = {}
    for seed in (0, 1):
        overrides = [
            *SYNC,
            "run.steps=3",
            f"run.seed={seed}",
            f"run.name=seed{seed}",
            f"run.output_dir={root}",
            "run.progress=false",
            "rollout.prompts_per_step=4",
            "task.train_size=8",  # 12 trained groups from 8 prompts: two steps share a prompt
            "task.eval_size=16",
            "eval.greedy=false",
            "monitor.dump_every=1",
        ] + (["alerts.stagnation_steps=1", "alerts.stagnation_delta=1"] if seed else [])  # seed1: reward stagnation alerts at step 2
        config = load_config(REPO / "configs/quickstart.yaml", overrides)
        runs[f"seed{seed}"] = train(config, fresh_workers(config))
    with served(root) as url, chromium() as driver:
        open_page(driver, url)
        assert [r["data-run"] for r in attrs(driver, "#runs .run", "data-run")] == ["seed0", "seed1"]
        check_curves(driver, runs, "reward/mean")
        check_curves(driver, runs, "train/grad_norm")
        check_trajectories(driver, "seed1", runs["seed1"])
        for name, run in runs.items():
            check_timeline(driver, name, run)
        assert read_jsonl(runs["seed1"] / "alerts.jsonl"), "seed1 should have alerted (reward stagnation)"
        check_alerts(driver, runs, "reward/mean")
        screenshot(driver, tmp_path / "dashboard-real-runs.png")


def handmade_run(run: Path) -> None:
    """Three steps of a multi-turn tool environment as the run directory's contract has them: tokens of the
    environment (loss mask 0) inside completions, guard flags, NaN metrics, a timeline and alerts."""
    (run / "rollouts").mkdir(parents=True)
    metrics = [{"step": 0, "eval/accuracy": 0.25, "weights/version": 0}]
    spans, alerts = [], []
    for step in (1, 2, 3):
        start = 2.0 * step
        metrics.append(
            {
                "step": step,
                "reward/mean": 0.25 * step,
                "train/entropy": "nan" if step == 2 else 0.5 / step,
                "hacking/any_rate": 0.25,
                "timing/elapsed_s": start + 2,
            }
        )
        spans += [
            {"actor": "engine-0", "stage": "generate", "step": step, "start_s": start, "end_s": start + 1.25},
            {"actor": "trainer-0", "stage": "forward_backward", "step": step, "start_s": start + 1.25, "end_s": start + 1.75},
            {"actor": "trainer-0", "stage": "publish", "step": step, "start_s": start + 1.75, "end_s": start + 2},
        ]
        episodes = []
        for position, prompt in enumerate(["2+2=", "3*4="]):
            for index in range(2):
                tokens = ["<call>", "add", "</call>", "\n", "<result>4</result>", "\n", "4", ""]
                mask = [1, 1, 1, 0, 0, 0, 1, 1]
                reward = float(index == 1)
                episodes.append(
                    {
                        "step": step,
                        "position": 10 * step + position,
                        "index": index,
                        "env": ["calculator", "python"][position],
                        "prompt": prompt,
                        "prompt_ids": [1, 2, 3],
                        "completion": "".join(tokens),
                        "completion_ids": list(range(100, 100 + len(tokens))),
                        "completion_tokens": tokens,
                        "engine_logprobs": [(-0.5 - 0.125 * k) * m for k, m in enumerate(mask)],  # 0.0 on environment tokens
                        "trainer_logprobs": [-0.5 - 0.125 * k + (0.0625 if k % 2 else -0.03125) for k in range(len(tokens))],
                        "advantages": [(reward - 0.5) * (k + 1) / 4 * m for k, m in enumerate(mask)],
                        "reward": reward,
                        "sub_rewards": json.dumps({"task": reward}),
                        "guard_flags": ["repetition"] if (position, index) == (1, 1) else [],
                        "weight_versions": [step - 1 if m else -1 for m in mask],
                        "loss_mask": mask,
                        "turns": 2,
                        "tool_calls": 1,
                        "valid": True,
                        "error": None,
                        "truncated": False,
                        "weight_version": step - 1,
                    }
                )
        pq.write_table(pa.Table.from_pylist(episodes), run / f"rollouts/step_{step:06d}.parquet")
    alerts.append({"step": 2, "kind": "nonfinite", "message": "train/entropy was nan", "time_s": 6.0})
    for name, rows in (("metrics", metrics), ("timeline", spans), ("alerts", alerts)):
        (run / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (run / "config.yaml").write_text("task:\n  name: calculator\n")


def test_dashboard_of_a_multi_turn_run(tmp_path):
    root = tmp_path / "runs"
    handmade_run(root / "tools")
    runs = {"tools": root / "tools"}
    with served(root) as url, chromium() as driver:
        open_page(driver, url)
        check_curves(driver, runs, "reward/mean")
        check_curves(driver, runs, "train/entropy")  # its NaN is a marker, not a point of the line
        assert [a["data-step"] for a in attrs(driver, 'figure[data-metric="train/entropy"] .pt.nonfinite', "data-step")] == ["2"]
        check_trajectories(driver, "tools", runs["tools"])
        env_tokens = attrs(driver, '.episode[data-position="30"][data-index="0"] .tok.env', "data-i", "title")
        assert [t["data-i"] for t in env_tokens] == ["3", "4", "5"] and all(
            t["title"].endswith("environment token (not trained)") for t in env_tokens
        )
        check_timeline(driver, "tools", runs["tools"])
        check_alerts(driver, runs, "reward/mean")
        driver.find_element("css selector", '.run[data-run="tools"] button').click()
        settle(driver)
        assert driver.find_element("css selector", "#config pre").text == "task:\n  name: calculator"
        with (runs["tools"] / "metrics.jsonl").open("a") as metrics:  # the run writes on: a refresh shows its new step
            metrics.write(json.dumps({"step": 4, "reward/mean": 0.875, "timing/elapsed_s": 10.0}) + "\n")
        driver.find_element("id", "refresh").click()
        settle(driver)
        check_curves(driver, runs, "reward/mean")
        assert attrs(driver, 'figure[data-metric="reward/mean"] .pt', "data-step")[-1] == {"data-step": "4"}
        screenshot(driver, tmp_path / "dashboard-multi-turn.png")
