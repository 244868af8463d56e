"""A node's http endpoint without Spark: /metrics, /health, the console (in headless Chromium),
malformed requests; and the figures every view shares (``changefeed.feeds.status``): lag that
moves with the clock while changes are pending, one row per CockroachDB job, and whether a
pipeline holds a feed or job (``running_status``, ``SHOW CHANGEFEED JOBS``)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import changefeed
from changefeed.feeds.runners import claim
from changefeed.feeds.status import WAITING
from changefeed.observe import Metrics, Readiness
from changefeed.server import EndpointConfig
from changefeed.server.http import HttpEndpoint

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _make_db(db: Path) -> None:
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id Uint64, customer Utf8, PRIMARY KEY (id))")
        conn.execute("ALTER TABLE orders ADD CHANGEFEED updates WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
        conn.execute("CREATE TABLE dogs (id INT PRIMARY KEY, name STRING)")
        conn.execute("CREATE TABLE cats (id INT PRIMARY KEY, name STRING)")
        conn.execute("CREATE CHANGEFEED FOR TABLE dogs, cats INTO 'topics://'")


class Served:
    def __init__(self, db: Path) -> None:
        self.metrics = Metrics()
        self.readiness = Readiness(("http", "pipeline"))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.endpoint = HttpEndpoint(
            EndpointConfig(db=db, port=0, metrics=self.metrics, readiness=self.readiness)
        )
        host, port = asyncio.run_coroutine_threadsafe(self.endpoint.start(), self.loop).result(30)
        self.readiness.set("http", True)
        self.url = f"http://{host}:{port}"
        self.endpoint.endpoints = {"http": f"{host}:{port}"}

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Served, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db"
        _make_db(db)
        s = Served(db)
        try:
            yield s, db
        finally:
            s.stop()


def _job_id(db: Path) -> int:
    with changefeed.connect(db) as conn:
        return int(conn.execute("SHOW CHANGEFEED JOBS").rows[0][0])


def test_metrics_names_labels_and_counts(served: tuple[Served, Path]) -> None:
    s, db = served
    job = str(_job_id(db))
    now = time.time_ns()
    s.metrics.emitted("orders/updates", 3, 120, now - 5_000_000, 2_000_000)
    s.metrics.emitted(job, 2, 80, now - 30_000_000, 1_000_000)
    s.metrics.emitted(job, 0, 0, now - 20_000_000, 1_000_000)
    s.metrics.retried(job)
    r = httpx.get(s.url + "/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    # CockroachDB's names, no _total suffix on counters
    assert 'changefeed_emitted_messages{feed="orders/updates"} 3.0' in r.text
    assert f'changefeed_emitted_messages{{feed="{job}"}} 2.0' in r.text
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    for name in (
        "changefeed_running",
        "changefeed_emitted_messages",
        "changefeed_emitted_bytes",
        "changefeed_max_behind_nanos",
        "changefeed_commit_latency",
        "changefeed_error_retries",
        "changefeed_backfill_pending_ranges",
        "jobs_changefeed_currently_running",
        "endpoint_requests",
        "process_cpu_seconds",
    ):
        assert name in fams, name
    by = {(smp.name, smp.labels.get("feed")): smp.value for smp in fams["changefeed_error_retries"].samples}
    assert by[("changefeed_error_retries_total", job)] == 1
    lat = [
        smp
        for smp in fams["changefeed_commit_latency"].samples
        if smp.labels.get("feed") == job and smp.name.endswith("_count")
    ]
    assert lat[0].value == 2
    # one label per YDB feed and per job (never per job-internal feed)
    labels = {smp.labels["feed"] for smp in fams["changefeed_running"].samples}
    assert labels == {"orders/updates", job}
    assert fams["endpoint_requests"].samples


def test_metrics_of_many_feeds_is_fast(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        for i in range(100):
            conn.execute(f"CREATE TABLE t{i} (id Uint64, v Utf8, PRIMARY KEY (id))")
            conn.execute(f"ALTER TABLE t{i} ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
            conn.execute(f"UPSERT INTO t{i} (id, v) VALUES (1, 'x')")
    s = Served(db)
    try:
        httpx.get(s.url + "/metrics", timeout=10)
        r = httpx.get(s.url + "/metrics", timeout=10)
        assert r.status_code == 200
        assert r.text.count("changefeed_max_behind_nanos{") == 100
    finally:
        s.stop()


def test_health_and_readiness(served: tuple[Served, Path]) -> None:
    s, _ = served
    assert httpx.get(s.url + "/health", timeout=10).status_code == 200
    r = httpx.get(s.url + "/health?ready=1", timeout=10)
    assert r.status_code == 503 and "pipeline" in r.json()["error"]
    s.readiness.set("pipeline", True)
    try:
        assert httpx.get(s.url + "/health?ready=1", timeout=10).status_code == 200
    finally:
        s.readiness.set("pipeline", False)


def _raw(url: str, data: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            got = sock.recv(65536)
            if not got:
                break
            chunks.append(got)
    return b"".join(chunks)


def test_malformed_requests_get_one_error_and_others_are_served(served: tuple[Served, Path]) -> None:
    s, _ = served
    assert _raw(s.url, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(s.url, b"GET / HTTP/1.1\r\nno colon here\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(s.url, b"GET /metrics HTTP/1.1\r\nContent-Length: x\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert httpx.post(s.url + "/metrics", timeout=10).status_code == 405
    assert httpx.get(s.url + "/nope", timeout=10).status_code == 404
    assert httpx.get(s.url + "/metrics", timeout=10).status_code == 200
    text = httpx.get(s.url + "/metrics", timeout=10).text
    errors = [
        smp.value
        for f in text_string_to_metric_families(text)
        if f.name == "endpoint_errors"
        for smp in f.samples
        if smp.labels["endpoint"] == "http"
    ]
    assert errors and errors[0] >= 5


def test_lag_moves_with_the_clock_while_changes_are_pending(tmp_path: Path) -> None:
    from changefeed.cli.run_cmd import feeds_report

    db = tmp_path / "db"
    _make_db(db)
    with changefeed.connect(db) as conn:
        conn.execute("UPSERT INTO orders (id, customer) VALUES (1, 'a')")
        conn.execute("INSERT INTO dogs (id, name) VALUES (1, 'Rex')")
    first = {r["name"]: r for r in feeds_report(db)}
    time.sleep(0.3)
    second = {r["name"]: r for r in feeds_report(db)}
    assert set(first) == {"updates", f"job {_job_id(db)}"}  # one row per job, not one per table
    for name in first:
        assert first[name]["pending_changes"] is True
        assert second[name]["lag_s"] >= first[name]["lag_s"] + 0.25, name
        assert first[name]["running_status"] == WAITING
        assert first[name]["held"] is False
    with changefeed.connect(db) as conn:
        rows = conn.execute("SHOW CHANGEFEED JOBS")
        assert rows.rows[0][rows.columns.index("status")] == "running"
        assert rows.rows[0][rows.columns.index("running_status")] == WAITING
    with claim(db, "node"):
        held = {r["name"]: r for r in feeds_report(db)}
        assert all(r["held"] for r in held.values())
        assert held["updates"]["running_status"].startswith("running: resolved=")
        with changefeed.connect(db) as conn:
            rows = conn.execute("SHOW CHANGEFEED JOBS")
            assert rows.rows[0][rows.columns.index("running_status")].startswith("running: resolved=")


def test_status_rows_of_many_feeds(tmp_path: Path) -> None:
    """One status row per feed (their read time is node_bench.py metrics' status_ms_per_feed)."""
    from changefeed.engine.database import DB_FILE, open_sqlite
    from changefeed.feeds.status import statuses

    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        for i in range(50):
            conn.execute(f"CREATE TABLE t{i} (id Uint64, v Utf8, PRIMARY KEY (id))")
            conn.execute(f"ALTER TABLE t{i} ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
            conn.execute(f"UPSERT INTO t{i} (id, v) VALUES (1, 'x')")
    conn2 = open_sqlite(db / DB_FILE, readonly=True)
    try:
        got = statuses(conn2, db, time.time_ns())
    finally:
        conn2.close()
    assert len(got) == 50
    assert {s.name for s in got} == {"f"} and all(s.pending_changes for s in got)


def _dump_dom(url: str, tmp: Path, budget_ms: int = 8000) -> str:
    assert Path(CHROMIUM).exists(), "headless Chromium is needed: make setup installs Debian's chromium"
    out = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'chromium'}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return out.stdout.decode()


def test_console_in_headless_chromium(served: tuple[Served, Path], tmp_path: Path) -> None:
    s, db = served
    job = str(_job_id(db))
    for i in range(4):
        now = time.time_ns()
        s.metrics.emitted("orders/updates", 10 * (i + 1), 100, now - 1_000_000, 1_000_000)
        s.metrics.emitted(job, 5, 100, now - 1_000_000, 1_000_000)
        s.endpoint.sample()
    data: dict[str, Any] = httpx.get(s.url + "/api/console", timeout=10).json()
    assert {f["label"] for f in data["feeds"]} == {"orders/updates", job}
    assert len(data["series"]["orders/updates"]["rate"]) >= 4
    js = httpx.get(s.url + "/static/plotly.min.js", timeout=30)
    assert js.status_code == 200 and len(js.content) > 1_000_000
    dom = _dump_dom(s.url + "/", tmp_path)
    # every feed and job is listed, with its state
    assert 'data-feed="orders/updates"' in dom and f'data-feed="{job}"' in dom
    assert "s-running" in dom
    # plotly drew the throughput plot with points: its scatter trace has marker points
    throughput = dom[dom.index('id="throughput"') : dom.index('id="lag"')]
    assert "main-svg" in throughput, "plotly did not render the throughput plot"
    assert throughput.count('class="point"') >= 4, "no data points in the throughput plot"
    assert json.dumps("orders/updates")[1:-1] in throughput
