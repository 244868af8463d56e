"""The single-process baseline: what a user would write instead of the Spark job.

A plain Python loop over the change stream: read ``x<id>`` in transaction-aligned chunks
(:func:`changefeed.engine.changes.read_changes`), encode each chunk with the feed's encoder
(``encode_python``, the reference face of the same encoder Spark runs), and append the records to
the feed's topic, one append per topic partition, idempotent by ``(writer, batch id)``. The records
are the same as the Spark pipeline's; only the writer id differs (``baseline-<feed id>``), so run it
on its own copy of a database, not next to ``changefeed run`` on the same feed.

Exactly once: the batch id of a chunk is its end seq. On start, the last committed batch of every
partition is read back; if a crash left partitions at two different batches, the chunk between
them is redone first (partitions that have it skip it), then delivery continues from there.
Barriers (``BARRIERS_INTERVAL``, formerly ``RESOLVED_TIMESTAMPS``): the clock is closed with an
empty transaction, and the barrier (``[step, 0]``, the close rounded down to the interval) goes into the same append
as the data of the chunk that reaches every change visible after the close, after every change
below it and before those after it (``delivery.append.with_resolved``). Initial scans (``INITIAL_SCAN``): the rows at the feed's creation
(the current table with later changes undone by their old images) go first, as snapshot rows.

Command line: ``python -m changefeed.pipeline.baseline --db DIR [--feed NAME] [--batch-rows N] [--follow]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import read_changes
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import Database
from changefeed.feeds.spec import FeedSpec, barrier_of
from changefeed.feeds.store import all_feeds
from changefeed.formats.base import Encoder, get_encoder
from changefeed.pipeline.delivery.append import RECORDS, with_resolved
from changefeed.topics import TopicStore

__all__ = ["deliver", "deliver_all", "main", "writer_id"]

#: Batch ids of initial-scan chunks: below every change batch id (which are seqs >= 1).
SNAPSHOT_BATCH_BASE = -(10**15)
CHANGE_ERASE = 11


def writer_id(feed: FeedSpec) -> str:
    return f"baseline-{feed.id}"


def _find(db: Database, feed: str | int) -> tuple[FeedSpec, TableSchema]:
    db.refresh_catalog()
    for row in all_feeds(db.conn):
        s = row.spec
        if feed in (s.id, str(s.id), s.name, s.topic, f"{row.table}/{s.name}"):
            return s, db.table_by_id(s.table_id)
    raise LookupError(f"no changefeed {feed!r} in {db.path}")


class _Feed:
    def __init__(
        self, db: Database, store: TopicStore, feed: FeedSpec, table: TableSchema, encoder: Encoder
    ) -> None:
        self.db, self.store, self.feed, self.table, self.encoder = db, store, feed, table, encoder
        self.writer = writer_id(feed)
        self.delivered = 0
        self.last_resolved = 0.0

    # ------------------------------------------------------------------ journal
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.conn.execute(sql, params).fetchall()

    def top(self) -> int:
        return int(self._read(f"SELECT COALESCE(MAX(seq), 0) FROM x{self.table.id}")[0][0])

    def cut(self, start: int, top: int, rows: int) -> int:
        """End seq of a chunk starting after ``start``: about ``rows`` rows, whole transactions."""
        r = self._read(
            f"SELECT tx FROM x{self.table.id} WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?",
            (start, top, rows - 1),
        )
        if not r:
            return top
        end = self._read(f"SELECT MAX(seq) FROM x{self.table.id} WHERE tx = ?", (r[0][0],))[0][0]
        return int(min(end, top))

    # ------------------------------------------------------------------ topic
    def committed(self) -> list[int | None]:
        return [
            self.store.committed_batch(self.feed.topic, p, self.writer) for p in range(self.feed.partitions)
        ]

    def append(
        self,
        batch_id: int,
        records: list[tuple[int, bytes | None, bytes, int]],
        resolved: tuple[bytes, int] | None,
    ) -> None:
        writer = self.writer
        if not records and resolved is not None:
            # a resolved record alone (an idle feed): its own writer, batch id its time, so it
            # is not taken for a replay of the last data batch (same end seq)
            writer, batch_id = f"{self.writer}-resolved", resolved[1]
        parts: list[list[tuple[bytes | None, bytes, int]]] = [[] for _ in range(self.feed.partitions)]
        for p, k, v, ts in records:
            parts[p].append((k, v, ts))
        for p, recs in enumerate(parts):
            keys, vals, tss = (list(c) for c in zip(*recs, strict=True)) if recs else ([], [], [])
            t = pa.table(
                [pa.array(keys, pa.binary()), pa.array(vals, pa.binary()), pa.array(tss, pa.int64())],
                schema=RECORDS,
            )
            if resolved is not None:
                t = with_resolved(t, resolved)
            self.delivered += self.store.append(self.feed.topic, p, writer, batch_id, t)

    def encode(self, batch: pa.RecordBatch) -> list[tuple[int, bytes | None, bytes, int]]:
        return self.encoder.encode_python(batch, self.table, self.feed)

    # ------------------------------------------------------------------ phases
    def snapshot(self, batch_rows: int) -> None:
        """Initial scan: the table at the feed's creation, as snapshot change rows, chunk by chunk.

        The same reconstruction as the Spark scan (``pipeline.snapshot.scan``): current rows, with changes
        made after the creation point undone through their old images, read in the key-range
        chunks of the feed's saved scan plan, so a restart re-reads exactly the same chunks."""
        from changefeed.pipeline.snapshot.chunks import read_chunk
        from changefeed.pipeline.snapshot.scan import load_or_plan

        plan = load_or_plan(self.db.path.absolute(), self.feed, self.table, batch_rows)
        bounds = plan["bounds"]
        for n in range(len(bounds) + 1):
            bid = SNAPSHOT_BATCH_BASE + n
            done = self.committed()
            if all(d is not None and d >= bid for d in done):
                continue
            batch = read_chunk(str(self.db.path.absolute()), self.table, self.feed, bounds, n)
            self.append(bid, self.encode(batch) if batch.num_rows else [], None)

    def resolved_due(self) -> bool:
        return bool(self.feed.resolved_ns) and (time.monotonic() - self.last_resolved) * 1e9 >= (
            self.feed.resolved_ns or 0
        )

    def chunk(self, start: int, end: int, resolved: tuple[bytes, int] | None) -> None:
        batch = read_changes(self.db.conn, self.table, start, end)
        self.append(end, self.encode(batch), resolved)

    def run(
        self, batch_rows: int, *, follow: bool = False, poll: float = 0.05, stop_after: float | None = None
    ) -> int:
        feed = self.feed
        if feed.initial_scan:
            self.snapshot(batch_rows)
        done = self.committed()
        lo = min((d if d is not None else feed.created_seq) for d in done)
        lo = max(lo, feed.created_seq)
        hi = max((d for d in done if d is not None), default=lo)
        if hi > lo:  # a crash between partitions of one chunk: redo exactly that chunk first
            self.chunk(lo, hi, None)
            lo = hi
        target = self.top()
        deadline = None if stop_after is None else time.monotonic() + stop_after
        while True:
            resolved: tuple[bytes, int] | None = None
            if self.resolved_due():
                ts, tx = self.db.close_timestamp()
                when = barrier_of(ts, feed.resolved_ns or 1).wall if feed.kind == "ydb" else ts.wall
                resolved = (self.encoder.resolved(ts, tx, feed), when)
            top = self.top()
            if not follow:
                top = max(top if resolved is not None else target, target)
            end = self.cut(lo, top, batch_rows) if top > lo else lo
            if end == top and resolved is not None:
                self.last_resolved = time.monotonic()
            else:
                resolved = None
            if end > lo or resolved is not None:
                if end > lo:
                    self.chunk(lo, end, resolved)
                else:
                    self.append(lo, [], resolved)
                lo = end
                _progress(self.db, feed.id, lo, self.table.id)
            if not follow and lo >= target:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            if end == top:
                time.sleep(poll)
        return self.delivered


def _progress(db: Database, feed_id: int, seq: int, table_id: int) -> None:
    """Upsert the feed's ``_progress`` row: delivered seq and its commit timestamp."""
    c = db.conn
    with db.lock:
        try:
            c.execute("BEGIN IMMEDIATE")
            row = c.execute(
                f"SELECT ts, lg FROM x{table_id} WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
            ).fetchone()
            wall, logical = (int(row[0]), int(row[1])) if row else (0, 0)
            c.execute(
                "INSERT INTO _progress (feed_id, seq, wall, logical, updated_ns, detail) VALUES (?, ?, ?, ?, ?, NULL)"
                " ON CONFLICT (feed_id) DO UPDATE SET seq = max(seq, excluded.seq), wall = max(wall, excluded.wall),"
                " logical = excluded.logical, updated_ns = excluded.updated_ns",
                (feed_id, seq, wall, logical, time.time_ns()),
            )
            c.execute("COMMIT")
        except sqlite3.Error:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise


def deliver(
    db_dir: str | Path,
    feed_name_or_id: str | int,
    *,
    batch_rows: int = 100_000,
    follow: bool = False,
    stop_after: float | None = None,
) -> int:
    """Deliver every change committed before the call (``follow``: keep going) of one feed to its
    topic; returns the number of records appended (resolved records included)."""
    if batch_rows < 1:
        raise ValueError("batch_rows must be positive")
    db = Database(Path(db_dir))
    store = TopicStore(db_dir)
    try:
        feed, table = _find(db, feed_name_or_id)
        store.ensure_topic(feed.topic, feed.partitions, feed.retention_ns)
        return _Feed(db, store, feed, table, get_encoder(feed.format)).run(
            batch_rows, follow=follow, stop_after=stop_after
        )
    finally:
        store.close()
        db.close()


def deliver_all(db_dir: str | Path, *, batch_rows: int = 100_000) -> dict[str, int]:
    """:func:`deliver` for every running feed of the database."""
    db = Database(Path(db_dir))
    try:
        db.refresh_catalog()
        feeds = [(r.spec.id, r.spec.topic) for r in all_feeds(db.conn) if r.state in ("running", "scanning")]
    finally:
        db.close()
    return {topic: deliver(db_dir, fid, batch_rows=batch_rows) for fid, topic in feeds}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m changefeed.pipeline.baseline", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--db", required=True, help="database directory")
    ap.add_argument("--feed", help="feed id, name or topic (default: every running feed)")
    ap.add_argument("--batch-rows", type=int, default=100_000)
    ap.add_argument("--follow", action="store_true", help="keep delivering new changes until interrupted")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        if args.feed is not None:
            n = {str(args.feed): deliver(args.db, args.feed, batch_rows=args.batch_rows, follow=args.follow)}
        elif args.follow:
            raise SystemExit("--follow needs --feed")
        else:
            n = deliver_all(args.db, batch_rows=args.batch_rows)
    except KeyboardInterrupt:
        return 130
    dt = time.perf_counter() - t0
    for topic, count in n.items():
        print(f"{topic}: {count} records")
    print(f"{sum(n.values())} records in {dt:.2f} s", file=sys.stderr)
    return 0


_ = CommitTs

if __name__ == "__main__":
    raise SystemExit(main())
