"""A node's http endpoint (``changefeed start --http HOST:PORT``, default ``127.0.0.1:8080``).

* ``GET /metrics``: Prometheus text format, CockroachDB's changefeed metric names with a ``feed``
  label per YDB changefeed (its topic) and CockroachDB job (its id), the endpoints' own counters
  and the process's (:mod:`.exposition`);
* ``GET /health``: 200 while the process serves; ``GET /health?ready=1``: 200 once every
  endpoint listens and the pipeline runs, else 503 naming what is not ready (CockroachDB's
  ``/health?ready=1``);
* ``GET /``: the console (:mod:`.console`): every feed and job with its state, high water, lag
  and errors, and plots of throughput and lag over the last hour that update live, drawn with
  plotly.js served from the installed ``plotly`` package (``/static/plotly.min.js``: no CDN);
* ``GET /api/console``: what the console shows, as JSON.

Figures are read on the event loop's executor: one status read of the database per request
(:func:`changefeed.feeds.status.statuses`) and the process's :class:`~changefeed.observe.Metrics`.
A sampler adds a history point per feed every :data:`~changefeed.observe.metrics.SAMPLE_S` s.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.feeds.status import FeedStatus, statuses
from changefeed.observe import Readiness, default_metrics
from changefeed.observe.metrics import SAMPLE_S, Metrics
from changefeed.server import EndpointConfig
from changefeed.server.http import console, exposition
from changefeed.server.http.wire import HttpServer, Request, Response

log = logging.getLogger(__name__)

__all__ = ["HttpEndpoint", "create"]


def _json(status: int, body: Any) -> Response:
    return Response(status, orjson.dumps(body), "application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message, "code": status})


class HttpEndpoint:
    """The http endpoint of a node: metrics, health and the console over one database."""

    name = "http"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.metrics: Metrics = config.metrics if isinstance(config.metrics, Metrics) else default_metrics()
        self.readiness: Readiness = config.readiness or Readiness(("http",))
        self._http: HttpServer | None = None
        self._sampler: asyncio.Task[None] | None = None
        self.bound: tuple[str, int] = (config.host, config.port)
        self.endpoints: dict[str, str] = {}  # name -> "host:port", set by the node
        self.started = time.time()
        self._plotly: tuple[bytes, bytes] | None = None
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()

    async def start(self) -> tuple[str, int]:
        self._http = HttpServer(self.handle, _error, metrics=self.metrics, name=self.name)
        self.bound = await self._http.start(self.config.host, self.config.port)
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever())
        return self.bound

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sampler
            self._sampler = None
        if self._http is not None:
            await self._http.stop()
            self._http = None
        with self._conn_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- figures -----------------------------------------------------------------------------
    def statuses(self) -> list[FeedStatus]:
        """Every feed's status, through one read-only connection kept open (a new connection
        parses the whole schema, hundreds of tables, before its first query)."""
        db = Path(self.config.db).absolute()
        with self._conn_lock:
            if self._conn is None:
                if not (db / DB_FILE).exists():
                    return []
                self._conn = open_sqlite(db / DB_FILE, readonly=True)
            try:
                return statuses(self._conn, db, time.time_ns())
            except sqlite3.Error:
                self._conn.close()
                self._conn = None
                raise

    def sample(self) -> None:
        sts = self.statuses()
        self.metrics.sample({s.label: s.lag_s for s in sts})

    async def _sample_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(None, self.sample)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a figure we cannot read now: the next sample tries again
                log.debug("console sample failed: %s", exc)
            await asyncio.sleep(SAMPLE_S)

    def metrics_text(self) -> bytes:
        sts = self.statuses()
        t = exposition.Text()
        exposition.pipeline_text(t, self.metrics.snapshot(), sts)
        exposition.endpoint_text(t, self.metrics)
        t.metrics(exposition.process_families())
        return t.bytes()

    # -- routes ------------------------------------------------------------------------------
    async def handle(self, req: Request) -> Response:
        if req.method not in ("GET", "HEAD"):
            return _error(405, f"method {req.method} not allowed: this endpoint serves GET")
        loop = asyncio.get_running_loop()
        path = "/" + "/".join(req.path)
        if path == "/metrics":
            body = await loop.run_in_executor(None, self.metrics_text)
            return Response(200, body, exposition.CONTENT_TYPE)
        if path == "/health":
            if req.param("ready") in ("1", "true"):
                if self.readiness.ready():
                    return _json(200, {"status": "ready"})
                return _error(503, "node is not ready: " + "; ".join(self.readiness.not_ready()))
            return _json(200, {"status": "ok"})
        if path in ("/", "/index.html"):
            return Response(200, console.PAGE, "text/html; charset=utf-8", {"Cache-Control": "no-store"})
        if path == "/api/console":
            data = await loop.run_in_executor(None, self.console_data)
            return Response(200, orjson.dumps(data), "application/json", {"Cache-Control": "no-store"})
        if path == "/static/plotly.min.js":
            raw, packed = await loop.run_in_executor(None, self._plotly_js)
            headers = {"Cache-Control": "public, max-age=86400"}
            if "gzip" in req.headers.get("accept-encoding", "") and packed:
                return Response(
                    200, packed, "application/javascript", {**headers, "Content-Encoding": "gzip"}
                )
            return Response(200, raw, "application/javascript", headers)
        return _error(404, f"no such page: {path}")

    def _plotly_js(self) -> tuple[bytes, bytes]:
        if self._plotly is None:
            raw = console.plotly_js()
            self._plotly = (raw, gzip.compress(raw, 6) if raw else b"")
        return self._plotly

    def console_data(self) -> dict[str, Any]:
        sts = self.statuses()
        return console.data(
            sts,
            self.metrics,
            node={
                "db": str(Path(self.config.db).absolute()),
                "started": self.started,
                "ready": self.readiness.ready(),
                "not_ready": self.readiness.not_ready(),
                "endpoints": self.endpoints,
            },
        )


def create(config: EndpointConfig) -> HttpEndpoint:
    return HttpEndpoint(config)
