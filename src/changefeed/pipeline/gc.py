"""Garbage collection of the change stream: ``x<id>`` rows every feed of the table has delivered.

A row may go when its seq is at or below the delivered seq of *every* feed on its table (their
``_progress.seq``, or ``created_seq`` for a feed with no progress yet) and it was committed more
than ``min_age_ns`` ago. Tables whose change stream was switched on explicitly (``changes``
option) but have no feed keep their rows. Returns the number of rows deleted per table.
"""

from __future__ import annotations

import time
from pathlib import Path

from changefeed.engine.database import DB_FILE, open_sqlite

MIN_AGE_NS = 60 * 1_000_000_000
#: Rows deleted per write transaction (keeps writers' waits short).
DELETE_CHUNK = 50_000


def gc_changes(db: str | Path, *, min_age_ns: int = MIN_AGE_NS, now_ns: int | None = None) -> dict[int, int]:
    conn = open_sqlite(Path(db).absolute() / DB_FILE)
    now = time.time_ns() if now_ns is None else now_ns
    deleted: dict[int, int] = {}
    try:
        rows = conn.execute(
            "SELECT f.table_id, MIN(COALESCE(p.seq, f.created_seq)) FROM _feeds f"
            " LEFT JOIN _progress p ON p.feed_id = f.id GROUP BY f.table_id"
        ).fetchall()
        for table_id, floor in rows:
            total = 0
            while True:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # Re-check the floor inside the write transaction: a feed may have been added.
                    cur_floor = conn.execute(
                        "SELECT MIN(COALESCE(p.seq, f.created_seq)) FROM _feeds f LEFT JOIN _progress p"
                        " ON p.feed_id = f.id WHERE f.table_id = ?",
                        (table_id,),
                    ).fetchone()[0]
                    if cur_floor is None:
                        conn.execute("ROLLBACK")
                        break
                    limit = min(int(floor), int(cur_floor))
                    n = conn.execute(
                        f"DELETE FROM x{int(table_id)} WHERE seq IN (SELECT seq FROM x{int(table_id)}"
                        " WHERE seq <= ? AND ts < ? ORDER BY seq LIMIT ?)",
                        (limit, now - min_age_ns, DELETE_CHUNK),
                    ).rowcount
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                total += n
                if n < DELETE_CHUNK:
                    break
            if total:
                deleted[int(table_id)] = total
    finally:
        conn.close()
    return deleted
