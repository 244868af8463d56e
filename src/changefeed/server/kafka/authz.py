"""Topic privileges for the Kafka endpoint, mapped onto the privileges of the feed's table with
``changefeed.engine.privileges`` (the same rules as ``changefeed read``):

* admins (``root``, members of ``admin``; anonymous clients, where allowed, act as ``root``)
  may do everything;
* reading a feed's topic (Fetch, ListOffsets, OffsetCommit/OffsetFetch, seeing it in Metadata)
  needs ``SELECT`` or ``CHANGEFEED`` on every table whose changefeed writes the topic; writing
  (Produce) needs ``INSERT`` or ``UPDATE`` on those tables;
* a topic no changefeed writes (created through CreateTopics), and creating or deleting
  topics, is for admins only.

Answers are cached for a second, so a GRANT or REVOKE takes effect within one second on open
connections.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import orjson

from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.engine.privileges import ROOT, Privilege, check_login, effective
from changefeed.exceptions import ChangefeedError

__all__ = ["ADMIN", "READ", "WRITE", "Authorizer"]

READ = "read"
WRITE = "write"
ADMIN = "admin"
_NEEDS = {READ: (Privilege.SELECT, Privilege.CHANGEFEED), WRITE: (Privilege.INSERT, Privilege.UPDATE)}
_TTL_S = 1.0


class Authorizer:
    def __init__(self, db: Path) -> None:
        self.db = db
        self._cache: dict[tuple[str, str, str], tuple[float, bool]] = {}
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is None:
            path = self.db / DB_FILE
            if not path.exists():
                return None
            self._conn = open_sqlite(path, readonly=True)
        return self._conn

    def may_login(self, user: str) -> bool:
        """Runs in a worker thread: the user exists and may log in."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return user == ROOT
            try:
                check_login(conn, user)
            except (ChangefeedError, sqlite3.Error):
                return False
            return True

    def allowed(self, user: str, topic: str, action: str) -> bool:
        """Runs in a worker thread (reads the engine database). ``topic`` is ignored for ADMIN."""
        if user == ROOT:
            return True
        key = (user, topic, action)
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[0] < _TTL_S:
            return hit[1]
        with self._lock:
            ok = self._check(user, topic, action)
        self._cache[key] = (now, ok)
        return ok

    @staticmethod
    def _feed_tables(conn: sqlite3.Connection, topic: str) -> set[int]:
        return {
            int(tid)
            for tid, spec in conn.execute("SELECT table_id, spec FROM _feeds")
            if orjson.loads(spec).get("topic") == topic
        }

    def written_by_feed(self, topic: str) -> bool:
        """Runs in a worker thread: does a changefeed deliver to ``topic``?"""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return False
            try:
                return bool(self._feed_tables(conn, topic))
            except sqlite3.Error:
                return False

    def _check(self, user: str, topic: str, action: str) -> bool:
        conn = self._connection()
        if conn is None:
            return False
        try:
            privs = effective(conn, user)
            if privs.admin:
                return True
            if action == ADMIN:
                return False
            table_ids = self._feed_tables(conn, topic)
            if not table_ids:
                return False  # a topic no changefeed writes: admins only
            needs = _NEEDS[action]
            return all(any(privs.has(p, tid) for p in needs) for tid in table_ids)
        except sqlite3.Error:
            return False
