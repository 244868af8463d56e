"""A feed's delivery bookkeeping: checkpoints, writer ids, progress rows and the offset log.

Everything that writes a feed's records (the streaming query of ``stream/``, the initial scan and
the schema-change backfill of ``snapshot/``) records where it got to through these functions, so
none of them needs another's internals:

- ``checkpoint_dir``/``checkpoint_start``/``writer_id``: a feed's Spark checkpoint and the topic
  writer id its appends are idempotent under (a new checkpoint after a lost one is a new epoch);
- ``write_progress``/``delivered_seq``: the feed's ``_progress`` row (high water, delivered seq);
- ``batch_end_offset``/``batch_rows``: a micro-batch's end offset from the query's own offset log.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from changefeed.durable_files import write_durably
from changefeed.engine.database import DB_FILE, open_sqlite, write_gate
from changefeed.exceptions import PipelineError
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import FeedRow, all_feeds

ACTIVE_STATES = ("running", "scanning")


def checkpoint_dir(db: str | Path, feed_id: int) -> Path:
    return Path(db).absolute() / "checkpoints" / f"feed-{feed_id}"


def writer_id(feed: FeedSpec, epoch: str = "") -> str:
    """The topic writer of a feed's streaming query. A checkpoint made after an earlier one was
    removed gets its own ``epoch``: its batch ids restart at 0, and must not be taken for the
    old checkpoint's (already delivered) batches by the topic's idempotence markers."""
    return f"feed-{feed.id}" + (f"-e{epoch}" if epoch else "")


EPOCH_FILE = "changefeed-epoch.json"


def checkpoint_start(db: Path, feed: FeedSpec, ckpt: Path) -> tuple[str, int]:
    """(writer epoch, journal position to start from) for the feed's query at ``ckpt``.

    An existing checkpoint keeps its epoch and Spark resumes from its own offsets. A new
    checkpoint for a feed that has delivered before (its old checkpoint was deleted) starts a new
    epoch at the feed's recorded progress: ``_progress`` is written after a batch's appends, so
    at most the last micro-batch is delivered again and nothing is lost."""
    path = ckpt / EPOCH_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        return str(saved["epoch"]), int(saved["start_seq"])
    if (ckpt / "offsets").exists():  # a checkpoint from before epochs existed
        return "", feed.created_seq
    progress = delivered_seq(db, feed.id)
    epoch, start = (
        ("", feed.created_seq) if progress is None else (os.urandom(4).hex(), max(progress, feed.created_seq))
    )
    ckpt.mkdir(parents=True, exist_ok=True)
    write_durably(path, json.dumps({"epoch": epoch, "start_seq": start}).encode())
    return epoch, start


def delivered_seq(db: Path, feed_id: int) -> int | None:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        row = conn.execute("SELECT seq FROM _progress WHERE feed_id = ?", (feed_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else int(row[0])


def engine_conn(db: str | Path) -> sqlite3.Connection:
    return open_sqlite(Path(db).absolute() / DB_FILE)


def active_feeds(db: str | Path) -> list[FeedRow]:
    conn = open_sqlite(Path(db).absolute() / DB_FILE, readonly=True)
    try:
        return [f for f in all_feeds(conn) if f.state in ACTIVE_STATES]
    finally:
        conn.close()


_local = threading.local()


def _cached(db: str | Path, *, readonly: bool) -> sqlite3.Connection:
    """This thread's connection to ``db`` (a delivery writes progress after every micro-batch:
    opening a connection, and parsing the schema of every table, each time cost more than the
    write)."""
    cache: dict[tuple[str, bool], sqlite3.Connection] | None = getattr(_local, "conns", None)
    if cache is None:
        cache = _local.conns = {}
    key = (str(Path(db).absolute()), readonly)
    conn = cache.get(key)
    if conn is None:
        conn = cache[key] = open_sqlite(Path(key[0]) / DB_FILE, readonly=readonly)
    return conn


def _drop(db: str | Path, *, readonly: bool) -> None:
    cache: dict[tuple[str, bool], sqlite3.Connection] = getattr(_local, "conns", {})
    conn = cache.pop((str(Path(db).absolute()), readonly), None)
    if conn is not None:
        conn.close()


def write_progress(
    db: str | Path, feed_id: int, seq: int, wall: int, logical: int, detail: dict[str, Any] | None = None
) -> None:
    conn = _cached(db, readonly=False)
    gate = write_gate(
        Path(db).absolute() / DB_FILE
    )  # this process's writers queue here, not in SQLite's sleeps
    try:
        gate.acquire()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _feeds WHERE id = ?", (feed_id,)).fetchone() is not None:
                conn.execute(
                    "INSERT INTO _progress (feed_id, seq, wall, logical, updated_ns, detail) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (feed_id) DO UPDATE SET seq = excluded.seq, wall = max(wall, excluded.wall),"
                    " logical = CASE WHEN excluded.wall > wall OR (excluded.wall = wall AND excluded.logical > logical)"
                    " THEN excluded.logical ELSE logical END, updated_ns = excluded.updated_ns, detail = excluded.detail",
                    (
                        feed_id,
                        seq,
                        wall,
                        logical,
                        time.time_ns(),
                        None if detail is None else json.dumps(detail),
                    ),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error:
        _drop(db, readonly=False)
        raise
    finally:
        gate.release()


def ts_at(db: str | Path, table_id: int, seq: int) -> tuple[int, int] | None:
    conn = _cached(db, readonly=True)
    try:
        row = conn.execute(
            f"SELECT ts, lg FROM x{table_id} WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
        ).fetchone()
    except sqlite3.OperationalError:
        row = None
    return None if row is None else (int(row[0]), int(row[1]))


def batch_end_offset(checkpoint: Path, batch_id: int) -> dict[str, Any]:
    """The source end offset of ``batch_id`` from the query's offset log."""
    path = checkpoint / "offsets" / str(batch_id)
    try:
        lines = path.read_text().splitlines()
        return dict(json.loads(lines[2]))
    except (OSError, IndexError, ValueError) as exc:
        raise PipelineError(
            f"cannot read the offset log {path} of batch {batch_id} ({exc}); the checkpoint is unreadable: "
            f"delete {checkpoint}: the feed then resumes from its last recorded progress (the last micro-batch "
            "may be delivered twice; nothing is lost)"
        ) from None


def batch_rows(checkpoint: Path, batch_id: int, end: dict[str, Any]) -> int | None:
    """Journal rows in ``batch_id`` (end minus the previous batch's end), or None if unknown."""
    if batch_id == 0:
        return None
    try:
        prev = batch_end_offset(checkpoint, batch_id - 1)
    except PipelineError:
        return None
    return max(0, int(end.get("seq", 0)) - int(prev.get("seq", 0)))
