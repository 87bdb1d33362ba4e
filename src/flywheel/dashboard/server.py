"""The dashboard's HTTP server (standard library only): the page and its script from ``static/``, and
JSON endpoints over the runs directory.

GET /api/runs                       every run: name, last step, dumped steps, timeline present, alert count
GET /api/metrics?run=R              {"names": [...], "rows": metrics.jsonl's objects}
GET /api/rollouts?run=R&step=N      the episodes of rollouts/step_N.parquet
GET /api/timeline?run=R             timeline.jsonl's spans
GET /api/alerts?run=R               alerts.jsonl's alerts
GET /api/config?run=R               config.yaml's text
Bad input gets a JSON ``{"error": sentence}`` with status 400 (a malformed parameter) or 404 (no such run or file).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from flywheel.dashboard.run_files import UnknownRun, find_runs, jsonable, metric_names, read_jsonl, read_rollouts, run_dir, run_summary

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


class BadRequest(ValueError):
    """A query parameter missing or malformed."""


def param(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name)
    if not values:
        raise BadRequest(f"missing query parameter {name!r}")
    return values[0]


def int_param(query: dict[str, list[str]], name: str) -> int:
    value = param(query, name)
    if not value.isdigit():
        raise BadRequest(f"query parameter {name!r} must be a non-negative integer, got {value!r}")
    return int(value)


def api_runs(root: Path, query: dict) -> list[dict]:
    return [run_summary(root, name) for name in find_runs(root)]


def api_metrics(root: Path, query: dict) -> dict:
    rows = read_jsonl(run_dir(root, param(query, "run")) / "metrics.jsonl")
    return {"names": metric_names(rows), "rows": rows}


def api_rollouts(root: Path, query: dict) -> list[dict]:
    return read_rollouts(run_dir(root, param(query, "run")), int_param(query, "step"))


def api_timeline(root: Path, query: dict) -> list[dict]:
    return read_jsonl(run_dir(root, param(query, "run")) / "timeline.jsonl")


def api_alerts(root: Path, query: dict) -> list[dict]:
    return read_jsonl(run_dir(root, param(query, "run")) / "alerts.jsonl")


def api_config(root: Path, query: dict) -> dict:
    path = run_dir(root, param(query, "run")) / "config.yaml"
    return {"text": path.read_text() if path.is_file() else ""}


API: dict[str, Callable[[Path, dict], object]] = {
    "/api/runs": api_runs,
    "/api/metrics": api_metrics,
    "/api/rollouts": api_rollouts,
    "/api/timeline": api_timeline,
    "/api/alerts": api_alerts,
    "/api/config": api_config,
}


def static_file(url_path: str) -> Path | None:
    """The shipped file a page path names (``/`` is index.html, ``/static/NAME`` a file of ``static/``); None otherwise."""
    if url_path in ("/", "/index.html"):
        name = "index.html"
    elif url_path.startswith("/static/"):
        name = url_path.removeprefix("/static/")
    else:
        return None
    return {p.name: p for p in STATIC.iterdir() if p.is_file()}.get(name)  # names shipped, nothing else


class DashboardHandler(BaseHTTPRequestHandler):
    root: Path  # set on the subclass ``make_server`` builds

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path in API:
            try:
                self.send(200, json.dumps(jsonable(API[url.path](self.root, parse_qs(url.query))), allow_nan=False).encode(), "application/json")
            except BadRequest as exc:
                self.send_error_json(400, str(exc))
            except UnknownRun as exc:
                self.send_error_json(404, str(exc))
            except (ValueError, OSError) as exc:  # a file the run wrote that cannot be read
                self.send_error_json(500, str(exc))
            return
        page = static_file(url.path)
        if page is None:
            self.send_error_json(404, f"no page {url.path!r}: the dashboard is at / and its data under /api/")
            return
        self.send(200, page.read_bytes(), CONTENT_TYPES.get(page.suffix, "application/octet-stream"))

    def send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, status: int, message: str) -> None:
        self.send(status, json.dumps({"error": message}).encode(), "application/json")

    def log_message(self, format: str, *args) -> None:  # requests are not logged
        pass


def make_server(root: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server (not yet serving) of the runs under ``root`` on host:port (port 0: a free one)."""
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a directory: pass the directory holding run directories (e.g. runs)")
    handler = type("Handler", (DashboardHandler,), {"root": root.resolve()})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise OSError(f"cannot serve on {host}:{port} ({exc.strerror}): pass another --port (0 picks a free one) or --host") from exc
    server.daemon_threads = True
    return server


def serve(root: Path, host: str, port: int) -> None:
    """Serves the dashboard until interrupted."""
    server = make_server(root, host, port)
    print(f"flywheel dashboard: http://{host}:{server.server_port}/ (runs under {root}); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
