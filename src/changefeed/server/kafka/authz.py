"""Topic privileges for the Kafka endpoint, mapped onto the privileges of the feed's table.

* ``root`` (and anonymous clients where they are allowed, who act as ``root``) may do everything;
* reading a feed's topic (Fetch, ListOffsets, OffsetCommit/OffsetFetch) needs ``SELECT`` (or
  ``ALL``) on the feed's table; writing to it (Produce) needs ``INSERT``, ``UPDATE`` or ``ALL``;
* topics that belong to no feed (created through CreateTopics) are open to every
  authenticated user; creating and deleting topics is for ``root``.

Grants come from the engine's ``_grants`` table (``GRANT SELECT ON t TO alice``; table id 0 holds
default privileges). Answers are cached for a second, so a GRANT or REVOKE takes effect within
one second on open connections.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson

from changefeed.engine.auth import ROOT
from changefeed.engine.database import DB_FILE, open_sqlite

__all__ = ["READ", "WRITE", "Authorizer"]

READ = "read"
WRITE = "write"
_NEEDS = {READ: ("SELECT", "ALL"), WRITE: ("INSERT", "UPDATE", "ALL")}
_TTL_S = 1.0


class Authorizer:
    def __init__(self, db: Path) -> None:
        self.db = db
        self._cache: dict[tuple[str, str, str], tuple[float, bool]] = {}

    def allowed(self, user: str, topic: str, action: str) -> bool:
        """Runs in a worker thread (reads the engine database)."""
        if user == ROOT:
            return True
        key = (user, topic, action)
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[0] < _TTL_S:
            return hit[1]
        ok = self._check(user, topic, action)
        self._cache[key] = (now, ok)
        return ok

    def _check(self, user: str, topic: str, action: str) -> bool:
        path = self.db / DB_FILE
        if not path.exists():
            return True
        conn = open_sqlite(path, readonly=True)
        try:
            table_ids = {
                int(tid)
                for tid, spec in conn.execute("SELECT table_id, spec FROM _feeds")
                if orjson.loads(spec).get("topic") == topic
            }
            if not table_ids:
                return True  # not a feed's topic
            needs = _NEEDS[action]
            marks = ",".join("?" * len(needs))
            for tid in table_ids:
                row = conn.execute(
                    f"SELECT 1 FROM _grants WHERE grantee = ? AND table_id IN (?, 0) AND privilege IN ({marks})",
                    (user, tid, *needs),
                ).fetchone()
                if row is None:
                    return False
            return True
        except sqlite3.Error:
            return False
        finally:
            conn.close()
