"""Journal retention: delete what no one may read any more, never what is still protected.

* ScyllaDB CDC log rows (``j<id>``) expire ``cdc.ttl`` seconds after their commit, like
  ScyllaDB's log TTL (0 keeps them forever).
* Change-stream rows (``x<id>``) are protected while any changefeed on the table has not yet
  delivered them: a feed's protected position (its protected timestamp) is its durably
  delivered sequence in ``_progress`` (or its creation position before its first delivery).
  Paused CockroachDB jobs keep protecting; canceled, failed and finished feeds do not
  (:data:`RELEASED_STATES`). Unprotected rows older than the table's retention go:
  - a CockroachDB table (``TableSchema.crdb_history``: SQL dialect, no YDB-declared column; it
    keeps its change history from its creation, feed or no feed, as CockroachDB keeps MVCC
    history): its ``gc.ttlseconds`` (``ALTER TABLE t
    CONFIGURE ZONE USING gc.ttlseconds = n``), else CockroachDB's default, 14,400 s
    (:data:`DEFAULT_GC_TTL_S`; at least the minimum age below). So a ``cursor`` up to that far
    back works before any changefeed exists;
  - a table with YDB changefeeds: its ``gc.ttlseconds``, else the minimum age
    (``CHANGEFEED_GC_MIN_AGE_S``, default 60 s);
  - any other table whose change stream is on without a feed: ``DEFAULT_CHANGES_RETENTION_NS``.
* Each table's GC threshold (the newest commit timestamp whose change rows may be gone) is kept
  in ``_meta``; a changefeed ``cursor`` older than it is refused (:func:`gc_threshold`).

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
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import Database
from changefeed.engine.type_errors import sql_text
from changefeed.exceptions import InvalidOption

NS = 1_000_000_000
DEFAULT_MIN_AGE_S = 60.0
DEFAULT_CHANGES_RETENTION_NS = 24 * 3600 * NS
#: CockroachDB's default ``gc.ttlseconds`` (4 hours; zone-configs/variables.md).
DEFAULT_GC_TTL_S = 14_400
DELETE_CHUNK = 50_000
#: Feed states that no longer protect change rows (CockroachDB releases a job's protected
#: timestamp when it is canceled, fails or finishes).
RELEASED_STATES = ("canceled", "failed", "succeeded")
#: The table setting (a CockroachDB zone configuration variable) giving the GC TTL in seconds.
GC_TTL = "gc.ttlseconds"
#: Zone configuration variables CockroachDB accepts; only gc.ttlseconds has an effect here.
ZONE_VARIABLES = (
    "range_min_bytes", "range_max_bytes", "global_reads", "num_replicas", "num_voters", "constraints",
    "voter_constraints", "lease_preferences", GC_TTL,
)  # fmt: skip

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
            change_rows += _gc_changes(db, schema, now, age)
        if phoenix.row_ttl_s(schema) is not None:
            ttl_rows += _expire_phoenix_ttl(db, schema, now)
        if phoenix.cdc_of(schema) is not None:
            _expire_phoenix_index(db, schema, now)
    return GcReport(log_rows, change_rows, ttl_rows)


def gc_ttl_ns(schema: TableSchema) -> int | None:
    ttl = schema.options.get(GC_TTL)
    return None if ttl is None else int(ttl) * NS


def configure_zone(schema: TableSchema, options: list[tuple[str, object]]) -> dict[str, object]:
    """Validate ``CONFIGURE ZONE USING`` variables; returns the table options to merge."""
    out: dict[str, object] = {}
    for key, value in options:
        if key not in ZONE_VARIABLES:
            raise InvalidOption(f'unsupported zone config parameter: "{key}"')
        if key in out:
            raise InvalidOption(f'duplicate zone config parameter: "{key}"')
        if key == GC_TTL:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidOption(f"{GC_TTL} must be an integer number of seconds, got {sql_text(value)}")
            if value < 1:
                raise InvalidOption(f"GC.TTLSeconds {value} less than minimum allowed 1")
        out[key] = value
    return out


def _threshold_key(table_id: int) -> str:
    return f"gc_threshold:{table_id}"


def gc_threshold(conn: sqlite3.Connection, schema: TableSchema) -> CommitTs | None:
    """The newest commit timestamp whose change rows GC may have removed (None: nothing removed)."""
    row = conn.execute("SELECT value FROM _meta WHERE key = ?", (_threshold_key(schema.id),)).fetchone()
    return None if row is None else CommitTs.parse_crdb(str(row[0]))


def set_gc_threshold(conn: sqlite3.Connection, schema: TableSchema, ts: CommitTs) -> None:
    conn.execute(
        "INSERT INTO _meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_threshold_key(schema.id), ts.crdb()),
    )


def _gc_changes(db: Database, schema: TableSchema, now: int, age: int) -> int:
    """Delete unprotected change rows in chunks (seq order), recording the GC threshold with each."""
    x = f"x{schema.id}"

    def chunk(conn: sqlite3.Connection) -> int:
        floor, cutoff = _phoenix_floor(conn, schema, now, _change_floor(conn, schema, now, age))
        bound = f"FROM {x} WHERE seq <= ? AND ts < ? ORDER BY seq"
        last = (
            conn.execute(
                f"SELECT seq, ts, lg {bound} LIMIT 1 OFFSET ?", (floor, cutoff, DELETE_CHUNK - 1)
            ).fetchone()
            or conn.execute(
                f"SELECT seq, ts, lg FROM {x} WHERE seq <= ? AND ts < ? ORDER BY seq DESC LIMIT 1",
                (floor, cutoff),
            ).fetchone()
        )
        if last is None:
            return 0
        n = int(conn.execute(f"DELETE FROM {x} WHERE seq <= ?", (int(last[0]),)).rowcount)
        set_gc_threshold(conn, schema, CommitTs(int(last[1]), int(last[2])))
        return n

    return _in_chunks(db, x, chunk)


def _constant(bounds: tuple[int, ...]) -> Bounds:
    def bound(_conn: sqlite3.Connection) -> tuple[int, ...]:
        return bounds

    return bound


def _phoenix_floor(
    conn: sqlite3.Connection, schema: TableSchema, now: int, bounds: tuple[int, int]
) -> tuple[int, int]:
    """Apache Phoenix (issue 11): a table with a CDC object keeps its change rows for its max
    lookback, whatever its feeds allow (and feeds keep theirs, whatever the lookback)."""
    floor, cutoff = bounds
    lookback = phoenix.history_floor_ns(conn, schema, now)
    if lookback is None:
        return floor, cutoff
    has_feeds = conn.execute("SELECT 1 FROM _feeds WHERE table_id = ?", (schema.id,)).fetchone()
    return floor, (min(cutoff, lookback) if has_feeds else lookback)


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

    def expire(conn: sqlite3.Connection) -> int:
        floor = phoenix.history_floor_ns(conn, schema, now)
        if floor is not None:
            phoenix.expire_index(conn, schema, floor // phoenix.NS_PER_MS)
        return 0

    _short_write(db, phoenix.index_table(schema), expire)


def _change_floor(conn: sqlite3.Connection, schema: TableSchema, now: int, age: int) -> tuple[int, int]:
    """(highest seq that may go, newest commit time that may go) for one table's change stream:
    nothing a protecting feed has not delivered, nothing younger than the table's GC TTL."""
    feeds = conn.execute(
        "SELECT f.created_seq, p.seq, f.state, f.kind FROM _feeds f LEFT JOIN _progress p ON p.feed_id = f.id"
        " WHERE f.table_id = ?",
        (schema.id,),
    ).fetchall()
    ttl = gc_ttl_ns(schema)
    protecting = [
        seq if seq is not None else created
        for created, seq, state, _kind in feeds
        if state not in RELEASED_STATES
    ]
    floor = min(protecting) if protecting else (1 << 62)
    if schema.crdb_history and not any(kind != "crdb" for *_, kind in feeds):
        return floor, now - (ttl if ttl is not None else max(DEFAULT_GC_TTL_S * NS, age))
    if feeds:
        return floor, now - (ttl if ttl is not None else age)
    return floor, now - (ttl if ttl is not None else DEFAULT_CHANGES_RETENTION_NS)


def _chunked(db: Database, table: str, sql: str, params: Bounds) -> int:
    """Run a ``... LIMIT ?`` delete repeatedly, one short transaction per chunk (the bounds are
    computed inside each chunk's transaction)."""
    return _in_chunks(db, table, lambda conn: int(conn.execute(sql, (*params(conn), DELETE_CHUNK)).rowcount))


def _in_chunks(db: Database, table: str, chunk: Callable[[sqlite3.Connection], int]) -> int:
    """Run ``chunk`` (which deletes up to :data:`DELETE_CHUNK` rows of ``table`` and returns how
    many) in short write transactions until it deletes fewer, or ``table`` is gone; the total."""
    total = 0
    while True:
        n = _short_write(db, table, chunk)
        if n is None:  # dropped meanwhile
            return total
        total += n
        if n < DELETE_CHUNK:
            return total


def _short_write(db: Database, table: str, body: Callable[[sqlite3.Connection], int]) -> int | None:
    """``body(conn)`` in a write transaction of its own, committed as every commit is
    (``Database.commit_sqlite``: announced to the durability board, the WAL's reserve kept, and
    durable before this returns, so no commit of this process is left unsynced); None, with
    nothing done, if ``table`` no longer exists."""
    with db.lock:
        db.wait_for_locks()
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            exists = db.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            if exists is None:
                db.conn.execute("ROLLBACK")
                return None
            n = body(db.conn)
            ticket = db.commit_sqlite()
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
    db.wait_durable(ticket)  # outside the lock, as Transaction.commit waits
    return n
