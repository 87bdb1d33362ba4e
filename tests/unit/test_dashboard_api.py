"""The dashboard's JSON endpoints on a hand-made runs directory: what each returns, and that no URL
reads outside the runs directory."""

import http.client
import json
import re
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flywheel.cli import main
from flywheel.dashboard.server import STATIC, make_server

METRICS = [
    {"step": 0, "weights/version": 0, "eval/accuracy": 0.25},
    {"step": 1, "reward/mean": 0.5, "train/entropy": "nan", "timing/elapsed_s": 2.0},
    {"step": 2, "reward/mean": 0.75, "train/entropy": 0.4, "timing/elapsed_s": 3.5, "hacking/any_rate": "inf"},
]
EPISODE = {
    "step": 2,
    "position": 7,
    "index": 1,
    "env": "arithmetic",
    "prompt": "1+2=",
    "prompt_ids": [5, 6, 7],
    "completion": "3<eos>",
    "completion_ids": [9, 2],
    "completion_tokens": ["3", "<eos>"],
    "engine_logprobs": [-0.5, float("nan")],
    "trainer_logprobs": [-0.25, -1.0],
    "advantages": [0.75, 0.75],
    "reward": 1.0,
    "sub_rewards": json.dumps({"task": 1.0}),
    "guard_flags": ["length"],
    "weight_versions": [1, 1],
    "loss_mask": [1, 1],
    "turns": 1,
    "tool_calls": 0,
    "valid": True,
    "error": None,
    "truncated": False,
    "weight_version": 1,
}
SPANS = [{"actor": "engine-0", "stage": "generate", "step": 1, "start_s": 0.0, "end_s": 1.5}]
ALERTS = [{"step": 2, "kind": "entropy_collapse", "message": "entropy fell below 0.1", "time_s": 3.5}]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """runs/a: every file; runs/group/b: metrics only; outside/ beside runs/, and runs/link pointing at it."""
    base = tmp_path_factory.mktemp("dashboard-api")
    root, a, b, outside = base / "runs", base / "runs/a", base / "runs/group/b", base / "outside"
    for d in (a / "rollouts", b, outside):
        d.mkdir(parents=True)
    write_jsonl(a / "metrics.jsonl", METRICS)
    (a / "metrics.jsonl").open("a").write('{"step": 3, "rew')  # a line still being written
    write_jsonl(b / "metrics.jsonl", METRICS[:1])
    write_jsonl(outside / "metrics.jsonl", [{"step": 0, "secret": 1}])
    (root / "link").symlink_to(outside)
    (a / "config.yaml").write_text("run:\n  name: a\n")
    pq.write_table(pa.Table.from_pylist([EPISODE]), a / "rollouts/step_000002.parquet")
    write_jsonl(a / "timeline.jsonl", SPANS)
    write_jsonl(a / "alerts.jsonl", ALERTS)
    return root


@pytest.fixture(scope="module")
def get(root):
    """GET a raw path (sent as written, no client-side normalisation): (status, parsed JSON or text)."""
    server = make_server(root, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def request(path: str):
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read().decode()
        connection.close()
        is_json = response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(body) if is_json else body

    yield request
    server.shutdown()
    server.server_close()


def test_runs_lists_run_directories_inside_the_root_only(get):
    status, runs = get("/api/runs")
    assert status == 200
    assert runs == [
        {"name": "a", "last_step": 2, "rollout_steps": [2], "timeline": True, "alerts": 1},
        {"name": "group/b", "last_step": 0, "rollout_steps": [], "timeline": False, "alerts": 0},
    ]  # not "link", which resolves outside the root


def test_metrics_rows_as_written_with_non_finite_values_as_strings(get):
    status, metrics = get("/api/metrics?run=a")
    assert status == 200
    assert metrics["rows"] == METRICS  # the half-written last line is left out
    assert metrics["names"] == ["eval/accuracy", "hacking/any_rate", "reward/mean", "timing/elapsed_s", "train/entropy", "weights/version"]


def test_rollouts_return_the_parquet_rows(get):
    status, episodes = get("/api/rollouts?run=a&step=2")
    assert status == 200
    assert episodes == [EPISODE | {"engine_logprobs": [-0.5, "nan"]}]
    assert get("/api/rollouts?run=a&step=5") == (200, [])  # no dump at that step


def test_timeline_alerts_and_config(get):
    assert get("/api/timeline?run=a") == (200, SPANS)
    assert get("/api/alerts?run=a") == (200, ALERTS)
    assert get("/api/timeline?run=group/b") == (200, [])
    assert get("/api/config?run=a") == (200, {"text": "run:\n  name: a\n"})


def test_page_and_script_are_served_and_reach_nothing_outside(get):
    status, page = get("/")
    assert status == 200 and '<script src="/static/dashboard.js">' in page
    for name in ("dashboard.js", "dashboard.css"):
        status, text = get(f"/static/{name}")
        assert status == 200 and len(text) > 1000
    shipped = "".join(p.read_text() for p in STATIC.iterdir())
    assert set(re.findall(r"https?://[^\s\"'`)]+", shipped)) == {"http://www.w3.org/2000/svg"}  # no CDN: the SVG namespace only


@pytest.mark.parametrize(
    "path",
    [
        "/api/metrics?run=../outside",
        "/api/metrics?run=link",
        "/api/metrics?run=/etc",
        "/api/config?run=a/../../outside",
        "/api/timeline?run=a/..",
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/../outside/metrics.jsonl",
        "/static/",
    ],
)
def test_paths_outside_the_root_or_the_page_are_refused(get, path):
    status, body = get(path)
    assert status == 404
    assert "secret" not in json.dumps(body) and "error" in body


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/metrics", "missing query parameter 'run'"),
        ("/api/rollouts?run=a&step=../2", "query parameter 'step' must be a non-negative integer, got '../2'"),
        ("/api/rollouts?run=a", "missing query parameter 'step'"),
    ],
)
def test_malformed_parameters_get_one_sentence(get, path, message):
    assert get(path) == (400, {"error": message})


def test_cli_refuses_a_runs_dir_that_does_not_exist(tmp_path, capsys):
    assert main(["dashboard", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"flywheel: error: {tmp_path / 'nope'} is not a directory: pass the directory holding run directories (e.g. runs)"
    )


def test_cli_refuses_a_port_in_use(root, capsys):
    server = make_server(root, "127.0.0.1", 0)
    try:
        assert main(["dashboard", str(root), "--port", str(server.server_port)]) == 2
    finally:
        server.server_close()
    message = f"flywheel: error: cannot serve on 127.0.0.1:{server.server_port} (Address already in use): pass another --port (0 picks a free one) or --host"
    assert capsys.readouterr().err.strip() == message
