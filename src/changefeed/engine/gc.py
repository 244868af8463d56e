"""Journal retention: delete what no one may read any more, never what is still protected.

* ScyllaDB CDC log rows (``j<id>``) expire ``cdc.ttl`` seconds after their commit, like
  ScyllaDB's log TTL (0 keeps them forever).
* Change-stream rows (``x<id>``) are protected while any changefeed on the table has not yet
  delivered them: a feed's protected position is its durably delivered sequence in
  ``_progress`` (or its creation position before its first delivery). Unprotected rows older
  than ``CHANGES_MIN_AGE`` are deleted; a table whose change stream was turned on without a
  feed keeps rows for ``DEFAULT_CHANGES_RETENTION``.
"""

from __future__ import annotations

from dataclasses import dataclass

from changefeed.engine.database import Database

NS = 1_000_000_000
#: Change rows younger than this are kept even when every feed has delivered them, so a feed
#: created a moment ago (whose first delivery is still to come) never loses its start.
CHANGES_MIN_AGE_NS = 60 * NS
DEFAULT_CHANGES_RETENTION_NS = 24 * 3600 * NS


@dataclass(frozen=True, slots=True)
class GcReport:
    log_rows: int
    change_rows: int


def collect_garbage(db: Database, now_ns: int | None = None) -> GcReport:
    """Run one GC pass in its own write transaction."""
    now = db.clock.now_ns() if now_ns is None else now_ns
    log_rows = change_rows = 0
    with db.lock:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            db.refresh_catalog()
            for schema in db.tables():
                if schema.cdc.enabled and schema.cdc.ttl > 0:
                    cutoff = now - schema.cdc.ttl * NS
                    log_rows += db.conn.execute(f"DELETE FROM j{schema.id} WHERE ts < ?", (cutoff,)).rowcount
                if not schema.changes:
                    continue
                feeds = db.conn.execute(
                    "SELECT f.created_seq, p.seq FROM _feeds f LEFT JOIN _progress p ON p.feed_id = f.id WHERE f.table_id = ?",
                    (schema.id,),
                ).fetchall()
                if feeds:
                    protected = min(seq if seq is not None else created for created, seq in feeds)
                    cutoff = now - CHANGES_MIN_AGE_NS
                    change_rows += db.conn.execute(f"DELETE FROM x{schema.id} WHERE seq <= ? AND ts < ?", (protected, cutoff)).rowcount
                else:
                    cutoff = now - DEFAULT_CHANGES_RETENTION_NS
                    change_rows += db.conn.execute(f"DELETE FROM x{schema.id} WHERE ts < ?", (cutoff,)).rowcount
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
    return GcReport(log_rows, change_rows)
