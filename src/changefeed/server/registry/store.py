"""The schema registry's durable state: one SQLite file in the database directory.

``<db>/schema_registry.sqlite`` holds

* ``schemas(id, canonical, schema, type)``: every distinct schema once, ids from 1; two texts
  that parse to the same schema (canonical form: the parsed JSON with sorted keys, compact) share
  one id, whatever subject registered them;
* ``versions(subject, version, schema_id, deleted)``: the versions of each subject; a soft delete
  sets ``deleted``, a permanent delete removes the row; version numbers keep growing;
* ``config(subject, compatibility)``: the global level (subject ``''``) and per-subject levels.

Every change runs in one ``BEGIN IMMEDIATE`` transaction (ids are read and assigned inside it), so
several processes serving the same directory never hand out one id twice.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from changefeed.sqlite_wal import durability, use_wal

FILE_NAME = "schema_registry.sqlite"
DEFAULT_COMPATIBILITY = "BACKWARD"
COMPATIBILITY_LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)

_DDL = """
CREATE TABLE IF NOT EXISTS schemas (
    id INTEGER PRIMARY KEY,
    canonical TEXT NOT NULL UNIQUE,
    schema TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT 'AVRO'
);
CREATE TABLE IF NOT EXISTS versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL REFERENCES schemas(id),
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
);
CREATE INDEX IF NOT EXISTS versions_by_schema ON versions(schema_id);
CREATE TABLE IF NOT EXISTS config (
    subject TEXT PRIMARY KEY,
    compatibility TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Version:
    subject: str
    version: int
    id: int
    schema: str
    deleted: bool = False


class RegistryStore:
    """Thread-safe access to the registry file (one connection, one lock)."""

    def __init__(self, db_dir: Path) -> None:
        db_dir.mkdir(parents=True, exist_ok=True)
        self.path = db_dir / FILE_NAME
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        use_wal(self._conn)
        # A registered schema must outlive power loss as the records that name its id do
        # (CHANGEFEED_SYNCHRONOUS, default FULL: SQLite syncs at each registration, which is rare).
        self._conn.execute(f"PRAGMA synchronous={durability().pragma_unshared}")
        self._conn.executescript(_DDL)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _txn(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    # ------------------------------------------------------------------ schemas
    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None:
        rows = self._query("SELECT schema, type FROM schemas WHERE id = ?", (schema_id,))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def id_of(self, canonical: str) -> int | None:
        rows = self._query("SELECT id FROM schemas WHERE canonical = ?", (canonical,))
        return int(str(rows[0][0])) if rows else None

    def versions_of_id(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        sql = "SELECT subject, version FROM versions WHERE schema_id = ?"
        if not include_deleted:
            sql += " AND deleted = 0"
        rows = self._query(sql + " ORDER BY subject, version", (schema_id,))
        return [(str(s), int(str(v))) for s, v in rows]

    # ------------------------------------------------------------------ subjects
    def subjects(self, include_deleted: bool = False) -> list[str]:
        sql = "SELECT DISTINCT subject FROM versions"
        if not include_deleted:
            sql += " WHERE deleted = 0"
        return [str(r[0]) for r in self._query(sql + " ORDER BY subject")]

    def versions(self, subject: str, include_deleted: bool = False) -> list[Version]:
        sql = (
            "SELECT v.version, v.schema_id, s.schema, v.deleted FROM versions v "
            "JOIN schemas s ON s.id = v.schema_id WHERE v.subject = ?"
        )
        if not include_deleted:
            sql += " AND v.deleted = 0"
        rows = self._query(sql + " ORDER BY v.version", (subject,))
        return [Version(subject, int(str(v)), int(str(i)), str(s), bool(d)) for v, i, s, d in rows]

    def register(self, subject: str, canonical: str, schema: str, schema_type: str) -> tuple[int, int, bool]:
        """Add ``schema`` as the next version of ``subject``; (id, version, new).

        If the subject already has it as a live version, nothing changes.
        """
        with self._txn() as c:
            row = c.execute("SELECT id FROM schemas WHERE canonical = ?", (canonical,)).fetchone()
            if row is None:
                (next_id,) = c.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM schemas").fetchone()
                c.execute(
                    "INSERT INTO schemas (id, canonical, schema, type) VALUES (?, ?, ?, ?)",
                    (next_id, canonical, schema, schema_type),
                )
                schema_id = int(next_id)
            else:
                schema_id = int(row[0])
                live = c.execute(
                    "SELECT version FROM versions WHERE subject = ? AND schema_id = ? AND deleted = 0",
                    (subject, schema_id),
                ).fetchone()
                if live is not None:
                    return schema_id, int(live[0]), False
            (version,) = c.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM versions WHERE subject = ?", (subject,)
            ).fetchone()
            c.execute(
                "INSERT INTO versions (subject, version, schema_id) VALUES (?, ?, ?)",
                (subject, version, schema_id),
            )
            return schema_id, int(version), True

    def soft_delete(self, subject: str, version: int | None) -> list[int]:
        with self._txn() as c:
            if version is None:
                rows = c.execute(
                    "SELECT version FROM versions WHERE subject = ? AND deleted = 0 ORDER BY version",
                    (subject,),
                ).fetchall()
                c.execute("UPDATE versions SET deleted = 1 WHERE subject = ?", (subject,))
            else:
                rows = c.execute(
                    "SELECT version FROM versions WHERE subject = ? AND version = ? AND deleted = 0",
                    (subject, version),
                ).fetchall()
                c.execute(
                    "UPDATE versions SET deleted = 1 WHERE subject = ? AND version = ?", (subject, version)
                )
            return [int(r[0]) for r in rows]

    def hard_delete(self, subject: str, version: int | None) -> list[int]:
        with self._txn() as c:
            if version is None:
                rows = c.execute(
                    "SELECT version FROM versions WHERE subject = ? ORDER BY version", (subject,)
                ).fetchall()
                c.execute("DELETE FROM versions WHERE subject = ?", (subject,))
                c.execute("DELETE FROM config WHERE subject = ?", (subject,))
            else:
                rows = [(version,)]
                c.execute("DELETE FROM versions WHERE subject = ? AND version = ?", (subject, version))
            return [int(r[0]) for r in rows]

    # ------------------------------------------------------------------ config
    def compatibility(self, subject: str = "") -> str | None:
        rows = self._query("SELECT compatibility FROM config WHERE subject = ?", (subject,))
        return str(rows[0][0]) if rows else None

    def set_compatibility(self, subject: str, level: str) -> None:
        with self._txn() as c:
            c.execute(
                "INSERT INTO config (subject, compatibility) VALUES (?, ?) "
                "ON CONFLICT(subject) DO UPDATE SET compatibility = excluded.compatibility",
                (subject, level),
            )

    def delete_compatibility(self, subject: str) -> str | None:
        with self._txn() as c:
            row = c.execute("SELECT compatibility FROM config WHERE subject = ?", (subject,)).fetchone()
            c.execute("DELETE FROM config WHERE subject = ?", (subject,))
            return str(row[0]) if row else None
