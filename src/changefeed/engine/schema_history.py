"""Where in a table's change stream its schema changed: ``_schema_changes``.

``ALTER TABLE .. ADD COLUMN`` / ``DROP COLUMN`` on a table with a change stream writes one row in
its own transaction: the new version, the transaction's commit timestamp and id, the change
stream's position ``seq`` at that moment (every change row ``<= seq`` was committed before the
change, every later one after it, in the new schema) and both schemas. CockroachDB changefeed
jobs read it to emit the schema-change backfill at the right place (``pipeline/snapshot/backfill.py``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs

DDL = (
    "CREATE TABLE IF NOT EXISTS _schema_changes (table_id INTEGER NOT NULL, version INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, wall INTEGER NOT NULL, logical INTEGER NOT NULL, tx INTEGER NOT NULL,"
    " old TEXT NOT NULL, new TEXT NOT NULL, PRIMARY KEY (table_id, version))"
)


@dataclass(frozen=True, slots=True)
class SchemaChange:
    table_id: int
    version: int  # the new schema's version
    seq: int  # change-stream position at the change: rows <= seq are before it
    at: CommitTs  # the change's commit timestamp
    tx: int
    old: TableSchema
    new: TableSchema

    def just_before(self) -> CommitTs:
        """The HLC timestamp right before the change (``hlc.Timestamp.Prev``): what a feed that
        stops at it has resolved."""
        at = self.at
        return CommitTs(at.wall, at.logical - 1) if at.logical > 0 else CommitTs(at.wall - 1, 2**31 - 1)

    def stop_message(self) -> str:
        """CockroachDB's error for a changefeed with ``schema_change_policy='stop'``."""
        return (
            'shut down due to schema change and schema_change_policy="stop": '
            f"schema change occurred at {self.at.crdb()}"
        )


def record(conn: sqlite3.Connection, old: TableSchema, new: TableSchema, at: CommitTs, tx: int) -> None:
    """Record (in the ALTER's transaction) that ``old`` became ``new`` at ``at``."""
    conn.execute(DDL)
    seq = int(conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{old.id}").fetchone()[0])
    conn.execute(
        "INSERT OR REPLACE INTO _schema_changes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            old.id,
            new.version,
            seq,
            at.wall,
            at.logical,
            tx,
            orjson.dumps(old.to_json()).decode(),
            orjson.dumps(new.to_json()).decode(),
        ),
    )


def history(conn: sqlite3.Connection, table_id: int) -> list[SchemaChange]:
    """The table's recorded schema changes, oldest first."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_schema_changes'"
    ).fetchone()
    if exists is None:
        return []
    return [
        SchemaChange(
            int(r[0]),
            int(r[1]),
            int(r[2]),
            CommitTs(int(r[3]), int(r[4])),
            int(r[5]),
            TableSchema.from_json(orjson.loads(r[6])),
            TableSchema.from_json(orjson.loads(r[7])),
        )
        for r in conn.execute(
            "SELECT table_id, version, seq, wall, logical, tx, old, new FROM _schema_changes"
            " WHERE table_id = ? ORDER BY version",
            (table_id,),
        )
    ]


def schema_at(changes: list[SchemaChange], seq: int, current: TableSchema) -> TableSchema:
    """The schema of the change row at ``seq``: the newest change before it decides, else the
    schema before the first change after it, else ``current``."""
    before = [c for c in changes if c.seq < seq]
    if before:
        return before[-1].new
    after = [c for c in changes if c.seq >= seq]
    return after[0].old if after else current


def schema_as_of(conn: sqlite3.Connection, current: TableSchema, seq: int, ts: CommitTs) -> TableSchema:
    """The table's schema at a snapshot taken at change-stream position ``seq`` and time ``ts``
    (a feed's creation point: what its initial scan reads)."""
    changes = history(conn, current.id)
    done = [c for c in changes if c.seq < seq or (c.seq == seq and c.at <= ts)]
    if done:
        return done[-1].new
    return changes[len(done)].old if changes else current


__all__ = ["DDL", "SchemaChange", "history", "record", "schema_as_of", "schema_at"]
