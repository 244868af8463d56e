"""``changefeed run`` (the Spark pipeline) and ``changefeed feeds`` (feed states, high water, lag)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import click

from changefeed.exceptions import ChangefeedError

__all__ = ["feeds", "feeds_report", "run"]


def _fail(exc: BaseException) -> None:
    click.echo(f"ERROR: {exc}", err=True)
    raise SystemExit(1)


class _ScanBar:
    """A rich progress bar per scanning feed, only on a terminal."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.tasks: dict[int, Any] = {}

    def __call__(self, feed: Any, scanned: int, total: int) -> None:
        if not sys.stdout.isatty():
            return
        from rich.progress import Progress

        if self.progress is None:
            self.progress = Progress()
            self.progress.start()
        tid = self.tasks.get(feed.id)
        if tid is None:
            tid = self.tasks[feed.id] = self.progress.add_task(
                f"initial scan {feed.topic}", total=max(total, 1)
            )
        self.progress.update(tid, completed=scanned, total=max(total, 1))

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


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
    """Run the Spark pipeline for every changefeed of the database: initial scans, then one
    streaming query per feed delivering its changes, exactly once, to its topic. Without
    --until-idle it runs until Ctrl-C or SIGTERM, then stops between micro-batches and exits 0."""
    from changefeed.pipeline import runner
    from changefeed.pipeline.spark.session import COMPILE_HUGE_METHODS

    kw: dict[str, Any] = {}
    if max_rows:
        kw["max_rows"] = max_rows
    bar = _ScanBar()
    try:
        if until_idle:
            runner.run_until_idle(db, on_progress=bar, **kw)
        else:
            # latency over throughput: leave HotSpot's huge-method limit in place (pipeline/spark/session.py)
            os.environ.setdefault(COMPILE_HUGE_METHODS, "0")
            runner.run_forever(db, on_progress=bar, **kw)
    except ChangefeedError as exc:
        bar.close()
        _fail(exc)
    bar.close()
    raise SystemExit(0)


# ------------------------------------------------------------------------------------------ feeds
def _ydb_ts(wall: int, tx: int | None) -> str:
    return f"[{wall // 1_000_000}, {tx if tx is not None else 0}]"


def feeds_report(db: Path) -> list[dict[str, Any]]:
    from changefeed.engine.database import DB_FILE, open_sqlite
    from changefeed.exceptions import DatabaseError
    from changefeed.feeds.store import all_feeds

    p = Path(db).absolute()
    if not (p / DB_FILE).exists():
        raise DatabaseError(f"{p} is not a changefeed database (no {DB_FILE})")
    conn = open_sqlite(p / DB_FILE, readonly=True)
    out = []
    try:
        progress = {
            r[0]: r[1:]
            for r in conn.execute("SELECT feed_id, seq, wall, logical, updated_ns, detail FROM _progress")
        }
        now = time.time_ns()
        for fr in all_feeds(conn):
            f = fr.spec
            seq, wall, logical, updated, detail = progress.get(
                f.id, (f.created_seq, f.created_wall, f.created_logical, None, None)
            )
            try:
                newest = conn.execute(
                    f"SELECT seq, ts, tx FROM x{f.table_id} ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                hw_tx = conn.execute(
                    f"SELECT tx FROM x{f.table_id} WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
                ).fetchone()
            except sqlite3.OperationalError:
                newest, hw_tx = None, None
            pending = newest is not None and int(newest[0]) > int(seq)
            lag = max(0.0, (now - int(wall)) / 1e9) if pending else 0.0
            if pending and newest is not None:
                lag = max(0.0, (int(newest[1]) - int(wall)) / 1e9) or lag
            scan = json.loads(detail) if detail else None
            out.append(
                {
                    "id": f.id,
                    "table": fr.table,
                    "name": f.name,
                    "kind": f.kind,
                    "format": f.format,
                    "mode": f.mode.value,
                    "topic": f.topic,
                    "partitions": f.partitions,
                    "state": fr.state,
                    "high_water": {"wall": int(wall), "logical": int(logical)},
                    "high_water_ydb": _ydb_ts(int(wall), int(hw_tx[0]) if hw_tx else f.created_tx),
                    "high_water_crdb": f"{int(wall)}.{int(logical):010d}",
                    "delivered_seq": int(seq),
                    "pending_changes": bool(pending),
                    "lag_s": round(lag, 3),
                    "scan": scan if fr.state == "scanning" or scan else None,
                    "updated_ns": updated,
                }
            )
        out.extend(_job_rows(conn, now))
    finally:
        conn.close()
    return out


def _job_rows(conn: sqlite3.Connection, now: int) -> list[dict[str, Any]]:
    """One row per CockroachDB changefeed job: its status, high water (the minimum over its feeds)
    and lag behind the clock."""
    from changefeed.feeds.jobs import all_jobs

    rows = []
    for j in all_jobs(conn):
        hw = j.high_water or j.start
        lag = max(0.0, (now - hw.wall) / 1e9) if j.status in ("running", "paused") else 0.0
        rows.append(
            {
                "id": j.id,
                "table": ",".join(t.name for t in j.targets),
                "name": f"job {j.id}",
                "kind": "crdb job",
                "format": j.format,
                "mode": "",
                "topic": ",".join(j.topics),
                "partitions": "",
                "state": j.status,
                "high_water": {"wall": hw.wall, "logical": hw.logical},
                "high_water_ydb": "",
                "high_water_crdb": hw.crdb(),
                "lag_s": round(lag, 3),
                "scan": None,
                "error": j.error,
                "feed_ids": list(j.feed_ids),
                "updated_ns": j.modified,
            }
        )
    return rows


@click.command("feeds")
@click.option(
    "--db", "db", required=True, type=click.Path(file_okay=False, path_type=Path), help="Database directory."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per feed.")
def feeds(db: Path, as_json: bool) -> None:
    """Every changefeed with its state, high-water timestamp and lag."""
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
        )
    Console(width=400 if not sys.stdout.isatty() else None).print(t)
