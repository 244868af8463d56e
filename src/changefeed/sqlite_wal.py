"""Switching a SQLite connection to write-ahead logging when other processes may be doing the same.

``PRAGMA journal_mode=WAL`` on a file still in rollback mode needs an exclusive lock. When two
processes open the same new file at once, each holds a shared lock while asking for the exclusive
one; SQLite sees the deadlock and fails one of them at once with "database is locked", without
calling its busy handler. The loser only has to ask again: by then its shared lock is released and
the winner has switched the file, so the second attempt finds WAL already on and needs no lock.
"""

from __future__ import annotations

import random
import sqlite3
import time

#: How long to keep retrying the switch before the error is the caller's.
SWITCH_TIMEOUT_S = 30.0


def use_wal(conn: sqlite3.Connection, *, timeout_s: float = SWITCH_TIMEOUT_S) -> str:
    """Run ``PRAGMA journal_mode=WAL`` until it is not refused for a lock; return the mode in force."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            row = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            return str(row[0]).lower() if row else ""
        except sqlite3.OperationalError as exc:
            if not _is_lock_conflict(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(0.001, 0.02))


def _is_lock_conflict(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text
