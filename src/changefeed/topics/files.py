"""The topic log's SQLite files: their schemas, and one connection per (process, file), opened
lazily, never carried across fork(), with the read and write transactions the store runs."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from changefeed.exceptions import CorruptFile, TopicError
from changefeed.sqlite_wal import WalSync, durability, use_wal, wal_sync

__all__ = [
    "BATCHES_SCHEMA",
    "CATALOG_APP_ID",
    "CATALOG_SCHEMA",
    "PARTITION_APP_ID",
    "PARTITION_SCHEMA",
    "Conn",
    "cached",
    "connection",
    "forget",
    "guard",
    "read_txn",
    "sync_dir",
    "write_txn",
]

# PRAGMA application_id values that mark a file as ours ("CFTC" / "CFTP").
CATALOG_APP_ID = 0x43465443
PARTITION_APP_ID = 0x43465450
BUSY_TIMEOUT_MS = 60_000

CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    partitions INTEGER NOT NULL,
    retention_ns INTEGER NOT NULL,
    created_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS group_offsets (
    grp TEXT NOT NULL,
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    PRIMARY KEY (grp, topic_id, partition)
) WITHOUT ROWID;
"""

#: Records are stored as Kafka record batches (magic 2, :mod:`changefeed.topics.batch`): ``data``
#: is the batch exactly as a Fetch returns it (base offset set, CRC-32C valid). ``max_ts`` is the
#: largest record timestamp in ns; ``ts_ns`` is NULL when every record's ns timestamp is its
#: batch's ms timestamp times 10**6, else the records' ns timestamps (int64, little-endian).
BATCHES_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    base_offset INTEGER PRIMARY KEY,
    last_offset INTEGER NOT NULL,
    max_ts INTEGER NOT NULL,
    write_time INTEGER NOT NULL,
    ts_ns BLOB,
    data BLOB NOT NULL
)
"""

#: ``records`` is the row-per-record format files written before batches were stored; it is read
#: (its records precede every batch of the file) and retained, never written any more.
PARTITION_SCHEMA = (
    BATCHES_SCHEMA
    + """;
CREATE TABLE IF NOT EXISTS records (
    offset INTEGER PRIMARY KEY,
    key BLOB,
    value BLOB NOT NULL,
    ts INTEGER NOT NULL,
    write_time INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS writers (writer TEXT PRIMARY KEY, batch INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY CHECK (id = 0), next_offset INTEGER NOT NULL);
INSERT OR IGNORE INTO state (id, next_offset) VALUES (0, 0);
"""
)


class Conn:
    __slots__ = ("conn", "lock", "pid", "syncer")

    def __init__(self, conn: sqlite3.Connection, syncer: WalSync | None) -> None:
        self.conn = conn
        self.lock = threading.RLock()
        self.pid = os.getpid()
        #: Group commit of this file, None when commits are not made durable (NORMAL, OFF).
        self.syncer = syncer


_conns: dict[str, Conn] = {}
_conns_lock = threading.Lock()
# Connections inherited through fork() are never closed in the child: closing could checkpoint
# and delete the parent's WAL. They are only kept referenced here.
_inherited: list[Conn] = []


def _after_fork_in_child() -> None:
    global _conns_lock
    _conns_lock = threading.Lock()
    _inherited.extend(_conns.values())
    _conns.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_corruption(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or type(exc) is sqlite3.DatabaseError:
        return True
    msg = str(exc)
    return "no such table" in msg or "no such column" in msg or "malformed" in msg


@contextlib.contextmanager
def guard(path: str) -> Iterator[None]:
    """Turn sqlite3 errors into our own: corruption -> CorruptFile naming the file, else TopicError."""
    try:
        yield
    except sqlite3.Error as exc:
        if _is_corruption(exc):
            raise CorruptFile(f"corrupt topic file {path}: {exc}") from exc
        raise TopicError(f"topic file {path}: {exc}") from exc


def open_file(path: str, app_id: int, schema: str) -> sqlite3.Connection:
    with guard(path):
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            found = conn.execute("PRAGMA application_id").fetchone()[0]
            if found == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                # Tables but no id: a foreign file, unless another process created it just now.
                found = conn.execute("PRAGMA application_id").fetchone()[0]
                if found == 0:
                    raise CorruptFile(f"corrupt topic file {path}: not a changefeed topic file")
            if found == 0:
                # A new file, which another process may be creating too: decide under the write lock.
                use_wal(conn)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    found = conn.execute("PRAGMA application_id").fetchone()[0]
                    if found == 0:
                        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                            raise CorruptFile(f"corrupt topic file {path}: not a changefeed topic file")
                        for stmt in schema.split(";"):
                            if stmt.strip():
                                conn.execute(stmt)
                        conn.execute(f"PRAGMA application_id={app_id}")
                        found = app_id
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            if found != app_id:
                raise CorruptFile(f"corrupt topic file {path}: not a changefeed topic file")
            if app_id == PARTITION_APP_ID:
                _add_batches_table(conn)
            use_wal(conn)
            conn.execute(f"PRAGMA synchronous={durability().pragma}")
            conn.execute("PRAGMA cache_size=-16000")
        except BaseException:
            conn.close()
            raise
        return conn


def _add_batches_table(conn: sqlite3.Connection) -> None:
    """A partition file written before batches were stored gets their table (its records stay
    where they are and are read from there)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'batches'").fetchone():
        return
    use_wal(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(BATCHES_SCHEMA)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def connection(path: str, app_id: int, schema: str) -> Conn:
    c = _conns.get(path)
    if c is not None and c.pid == os.getpid():
        return c
    with _conns_lock:
        c = _conns.get(path)
        if c is None or c.pid != os.getpid():
            c = Conn(open_file(path, app_id, schema), wal_sync(path) if durability().group_commit else None)
            _conns[path] = c
        return c


def forget(prefix: str) -> None:
    """Close this process's cached connections to files under ``prefix``.

    Each connection is closed after ``_conns_lock`` is released: a writer holding a file's lock
    may open another file (``ensure_topic`` holds the catalog's while it opens a partition's),
    so taking a file's lock under ``_conns_lock`` would deadlock against it."""
    with _conns_lock:
        gone = [_conns.pop(path) for path in [p for p in _conns if p.startswith(prefix)]]
    for c in gone:
        if c.pid == os.getpid():
            with c.lock:
                c.conn.close()


@contextlib.contextmanager
def write_txn(c: Conn) -> Iterator[sqlite3.Connection]:
    """A write transaction on ``c``, durable when the block is left (group commit: the sync is
    waited for after the file's lock is released, so the next writer commits meanwhile). A
    transaction that finds its work already done (an idempotent append seen before) waits too:
    what it saw may be another process's commit that is not durable yet."""
    with c.lock:
        c.conn.execute("BEGIN IMMEDIATE")
        try:
            yield c.conn
        except BaseException:
            if c.conn.in_transaction:
                c.conn.execute("ROLLBACK")
            raise
        c.conn.execute("COMMIT")
        ticket = c.syncer.ticket() if c.syncer is not None else 0
    if c.syncer is not None:
        c.syncer.wait(ticket)


def sync_dir(path: Path) -> None:
    """Make a directory's new entries durable (a new topic's folder)."""
    if not durability().group_commit:
        return
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def read_txn(c: Conn) -> Iterator[sqlite3.Connection]:
    """One read transaction on ``c`` (a consistent snapshot across statements)."""
    with c.lock:
        c.conn.execute("BEGIN")
        try:
            yield c.conn
        finally:
            c.conn.execute("COMMIT")


def cached(path: str) -> Conn | None:
    """This process's open connection to ``path``, if any (no stat, no lock)."""
    c = _conns.get(path)
    return c if c is not None and c.pid == os.getpid() else None
