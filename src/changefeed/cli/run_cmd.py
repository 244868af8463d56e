"""``changefeed run`` (the Spark pipeline) and ``changefeed feeds`` (feed states, high water, lag)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from changefeed.exceptions import ChangefeedError

__all__ = ["feeds", "feeds_report", "run"]


def _fail(exc: BaseException) -> None:
    click.echo(f"ERROR: {exc}", err=True)
    raise SystemExit(1)


class _Progress:
    """What ``run`` is doing, live on a terminal (a rich display: the phase, each feed's messages
    and bytes delivered, initial scans as bars); elsewhere, log lines on stderr."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics
        self.tty = sys.stderr.isatty()
        self.phase_text = "starting"
        self.scanned: set[str] = set()
        self.live: Any = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(
                self._render(), console=Console(stderr=True), refresh_per_second=4, transient=False
            )
            self.live.start()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._refresh, daemon=True)
            self._thread.start()

    def phase(self, text: str) -> None:
        self.phase_text = text
        if not self.tty:
            click.echo(f"changefeed run: {text}", err=True)

    def scan(self, feed: Any, scanned: int, total: int) -> None:
        if not self.tty and scanned >= total and feed.topic not in self.scanned:
            self.scanned.add(feed.topic)
            click.echo(f"changefeed run: initial scan of {feed.topic} done", err=True)

    def _render(self) -> Any:
        from rich.table import Table

        t = Table(title=f"changefeed run: {self.phase_text}", title_justify="left", box=None)
        for col in ("feed / job", "messages", "bytes", "retries", "backfill ranges left"):
            t.add_column(col)
        figures = self.metrics.snapshot()
        for label in sorted(figures):
            f = figures[label]
            t.add_row(
                label,
                str(f.emitted_messages),
                str(f.emitted_bytes),
                str(f.error_retries),
                str(f.backfill_pending_ranges) if f.backfill_pending_ranges else "",
            )
        return t

    def _refresh(self) -> None:
        while not self._stop.wait(0.25):
            self.live.update(self._render())

    def close(self) -> None:
        if self.live is not None:
            self._stop.set()
            self.live.update(self._render())
            self.live.stop()


@click.command("run")
@click.option(
    "--db", "db", required=True, type=click.Path(file_okay=False, path_type=Path), help="Database directory."
)
@click.option(
    "--until-idle", is_flag=True, help="Deliver everything committed before the start, then exit 0."
)
@click.option(
    "--max-rows",
    type=int,
    default=None,
    help="Journal rows per micro-batch at most (admission control; default 500000).",
)
def run(db: Path, until_idle: bool, max_rows: int | None) -> None:
    """Run the pipeline for every changefeed of the database (exactly once into the embedded
    topics and into kafka:// with exactly_once; at least once into other sinks, as CockroachDB),
    and apply the asynchronous replications whose destination it is: initial scans, then each feed's changes in micro-batches (small ones on the driver,
    large backlogs and schema-change backfills on Spark, whose session starts only when needed).
    Without --until-idle it runs until Ctrl-C or SIGTERM, then stops between micro-batches and
    exits 0. One pipeline per database: a node (changefeed start) already runs one."""
    from changefeed.observe import Metrics
    from changefeed.pipeline import runner
    from changefeed.pipeline.spark.session import COMPILE_HUGE_METHODS

    kw: dict[str, Any] = {}
    if max_rows:
        kw["max_rows"] = max_rows
    metrics = Metrics()
    progress = _Progress(metrics)
    try:
        if until_idle:
            runner.run_until_idle(
                db, on_progress=progress.scan, on_phase=progress.phase, metrics=metrics, **kw
            )
        else:
            from changefeed.cli.start_cmd import setup_logging

            setup_logging()
            # latency over throughput: leave HotSpot's huge-method limit in place (pipeline/spark/session.py)
            os.environ.setdefault(COMPILE_HUGE_METHODS, "0")
            runner.run_forever(db, on_progress=progress.scan, on_phase=progress.phase, metrics=metrics, **kw)
    except ChangefeedError as exc:
        progress.close()
        _fail(exc)
    progress.close()
    raise SystemExit(0)


# ------------------------------------------------------------------------------------------ feeds
def feeds_report(db: Path) -> list[dict[str, Any]]:
    """Every YDB changefeed and CockroachDB job (one row each) with its state, high water, lag
    and whether a pipeline holds it (``changefeed.feeds.status``: the figures a node serves)."""
    from changefeed.engine.database import DB_FILE, open_sqlite
    from changefeed.exceptions import DatabaseError
    from changefeed.feeds.status import statuses

    p = Path(db).absolute()
    if not (p / DB_FILE).exists():
        raise DatabaseError(f"{p} is not a changefeed database (no {DB_FILE})")
    conn = open_sqlite(p / DB_FILE, readonly=True)
    try:
        return [s.to_json() for s in statuses(conn, p, time.time_ns())]
    finally:
        conn.close()


@click.command("feeds")
@click.option(
    "--db", "db", required=True, type=click.Path(file_okay=False, path_type=Path), help="Database directory."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per feed.")
def feeds(db: Path, as_json: bool) -> None:
    """Every changefeed with its state, high-water timestamp and lag (asynchronous replications of
    this database too: their state, the barrier applied and the replica lag)."""
    try:
        rows = feeds_report(db)
    except ChangefeedError as exc:
        _fail(exc)
        return
    if as_json:
        for r in rows:
            click.echo(json.dumps(r))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(box=None, pad_edge=False)
    for col in (
        "table",
        "name",
        "kind",
        "format",
        "mode",
        "topic",
        "partitions",
        "state",
        "high water [step, txId]",
        "high water (hlc)",
        "lag",
        "scan",
        "running status",
    ):
        t.add_column(col, no_wrap=True)
    for r in rows:
        scan = r["scan"]
        scan_text = ""
        if scan and "total" in scan:
            scan_text = f"{scan.get('scanned', 0)}/{scan['total']}"
        t.add_row(
            r["table"],
            r["name"],
            r["kind"],
            r["format"],
            r["mode"],
            r["topic"],
            str(r["partitions"]),
            r["state"],
            r["high_water_ydb"],
            r["high_water_crdb"],
            f"{r['lag_s']:.3f}s",
            scan_text,
            r["running_status"] or "",
        )
    Console(width=400 if not sys.stdout.isatty() else None).print(t)
