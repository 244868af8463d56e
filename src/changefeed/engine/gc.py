"""Journal retention: delete what no one may read any more, never what is still protected.

* ScyllaDB CDC log rows (``j<id>``) expire ``cdc.ttl`` seconds after their commit, like
  ScyllaDB's log TTL (0 keeps them forever).
* Change-stream rows (``x<id>``) are protected while any changefeed on the table has not yet
  delivered them: a feed's protected position is its durably delivered sequence in
  ``_progress`` (or its creation position before its first delivery). Unprotected rows older
  than the minimum age (``CHANGEFEED_GC_MIN_AGE_S``, default 60 s) are deleted; a table whose
  change stream was turned on without a feed keeps rows for ``DEFAULT_CHANGES_RETENTION_NS``.

Deletes run in chunks of ``DELETE_CHUNK`` rows, each its own short write transaction, so writers
never wait long behind a GC pass; the protection floor is re-read inside every chunk's
transaction, so a feed created meanwhile is honoured.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from changefeed.engine import phoenix
from changefeed.engine.catalog import TableSchema
from changefeed.engine.database import Database

NS = 1_000_000_000
DEFAULT_MIN_AGE_S = 60.0
DEFAULT_CHANGES_RETENTION_NS = 24 * 3600 * NS
DELETE_CHUNK = 50_000

Bounds = Callable[[sqlite3.Connection], tuple[int, ...]]


def min_age_ns() -> int:
    """Change rows younger than this are kept even when delivered, so a feed created a moment ago
    never loses its start, and tests/validators can compare against recent history."""
    return int(float(os.environ.get("CHANGEFEED_GC_MIN_AGE_S", DEFAULT_MIN_AGE_S)) * NS)


@dataclass(frozen=True, slots=True)
class GcReport:
    log_rows: int
    change_rows: int
    ttl_rows: int = 0  # Apache Phoenix rows deleted by their table TTL


def collect_garbage(db: Database, now_ns: int | None = None, *, min_age: int | None = None) -> GcReport:
    """Run one GC pass over every table of ``db``."""
    now = db.clock.now_ns() if now_ns is None else now_ns
    age = min_age_ns() if min_age is None else min_age
    with db.lock:
        db.refresh_catalog()
        tables = db.tables()
    log_rows = change_rows = ttl_rows = 0
    for schema in tables:
        if schema.cdc.enabled and schema.cdc.ttl > 0:
            cutoff = now - schema.cdc.ttl * NS
            log_rows += _chunked(
                db,
                f"j{schema.id}",
                f"DELETE FROM j{schema.id} WHERE seq IN (SELECT seq FROM j{schema.id} WHERE ts < ? LIMIT ?)",
                _constant((cutoff,)),
            )
        if schema.changes:
            change_rows += _chunked(
                db,
                f"x{schema.id}",
                f"DELETE FROM x{schema.id} WHERE seq IN (SELECT seq FROM x{schema.id} WHERE seq <= ? AND ts < ? ORDER BY seq LIMIT ?)",
                _floor_of(schema, now, age),
            )
        if phoenix.row_ttl_s(schema) is not None:
            ttl_rows += _expire_phoenix_ttl(db, schema, now)
        if phoenix.cdc_of(schema) is not None:
            _expire_phoenix_index(db, schema, now)
    return GcReport(log_rows, change_rows, ttl_rows)


def _constant(bounds: tuple[int, ...]) -> Bounds:
    def bound(_conn: sqlite3.Connection) -> tuple[int, ...]:
        return bounds

    return bound


def _floor_of(schema: TableSchema, now: int, age: int) -> Bounds:
    def bound(conn: sqlite3.Connection) -> tuple[int, ...]:
        seq, ts = _change_floor(conn, schema.id, now, age)
        # Apache Phoenix (issue 11): a table with a CDC object keeps its change rows for its max
        # lookback, whatever its feeds allow (and feeds keep theirs, whatever the lookback).
        lookback = phoenix.history_floor_ns(conn, schema, now)
        if lookback is not None:
            has_feeds = conn.execute("SELECT 1 FROM _feeds WHERE table_id = ?", (schema.id,)).fetchone()
            ts = min(ts, lookback) if has_feeds else lookback
        return seq, ts

    return bound


def _expire_phoenix_ttl(db: Database, schema: TableSchema, now: int) -> int:
    """Apache Phoenix's TTL at "major compaction": rows whose TTL has passed (already invisible
    to reads) are deleted, and a table with a CDC object records one ``ttl_delete`` event per
    row, at this time, with the row's last image as its pre-image."""
    from changefeed.engine.txn import Transaction

    with db.lock:
        txn = Transaction(db, write=True)
        try:
            current = db.find_table(schema.name)
            if current is None or current.id != schema.id:
                txn.rollback()
                return 0
            st = txn.store(current)
            keys = [
                tuple(r)
                for r in db.conn.execute(
                    f"SELECT {', '.join(c.db for c in current.key)} FROM {st.t} WHERE _m > 0 AND _m <= ?",
                    (now,),
                )
            ]
            if keys:
                olds = st.get_rows(db.conn, keys, 0)  # as they were before they expired
                txn.phoenix_event = phoenix.EV_TTL_DELETE
                txn.delete_rows(current, keys, olds=olds)
            txn.commit()
            return len(keys)
        except BaseException:
            txn.rollback()
            raise


def _expire_phoenix_index(db: Database, schema: TableSchema, now: int) -> None:
    """Time-index rows beyond the max lookback go (Phoenix's CDC index TTL is its max lookback)."""
    with db.lock:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            floor = phoenix.history_floor_ns(db.conn, schema, now)
            exists = db.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                (phoenix.index_table(schema),),
            ).fetchone()
            if floor is not None and exists is not None:
                phoenix.expire_index(db.conn, schema, floor // phoenix.NS_PER_MS)
            db.conn.execute("COMMIT")
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise


def _change_floor(conn: sqlite3.Connection, table_id: int, now: int, age: int) -> tuple[int, int]:
    """(highest seq that may go, newest commit time that may go) for one table's change stream."""
    feeds = conn.execute(
        "SELECT f.created_seq, p.seq FROM _feeds f LEFT JOIN _progress p ON p.feed_id = f.id WHERE f.table_id = ?",
        (table_id,),
    ).fetchall()
    if feeds:
        return min(seq if seq is not None else created for created, seq in feeds), now - age
    return (1 << 62), now - DEFAULT_CHANGES_RETENTION_NS


def _chunked(db: Database, table: str, sql: str, params: Bounds) -> int:
    """Run a ``... LIMIT ?`` delete repeatedly, one short transaction per chunk (the bounds are
    computed inside each chunk's transaction)."""
    total = 0
    while True:
        with db.lock:
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                exists = db.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
                ).fetchone()
                if exists is None:  # dropped meanwhile
                    db.conn.execute("ROLLBACK")
                    return total
                n = db.conn.execute(sql, (*params(db.conn), DELETE_CHUNK)).rowcount
                db.conn.execute("COMMIT")
            except BaseException:
                if db.conn.in_transaction:
                    db.conn.execute("ROLLBACK")
                raise
        total += n
        if n < DELETE_CHUNK:
            return total
