"""The open sessions of one endpoint process, and what spans processes: CancelRequest by backend
key, ``CANCEL QUERY`` by query id and ``SHOW QUERIES`` (see :mod:`changefeed.server.pg.cluster`
for the worker processes; a registry without a cluster is a whole endpoint in one process)."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from changefeed.connection import Connection, Result
from changefeed.engine import auth
from changefeed.engine.auth import ScramSecret

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

#: SHOW QUERIES columns, as CockroachDB names them.
QUERY_COLUMNS = (
    "query_id",
    "node_id",
    "session_id",
    "user_name",
    "start",
    "query",
    "client_address",
    "application_name",
    "distributed",
    "phase",
)
#: The low byte of a backend process id names the worker process serving it.
WORKER_BITS = 8


class Cluster(Protocol):
    """The other processes of the endpoint, as a worker reaches them (``cluster.WorkerLink``)."""

    def forward_cancel(self, pid: int, key: int) -> None:
        """Hand a CancelRequest to the worker owning ``pid``."""
        ...

    async def ask(self, what: str, arg: Any = None) -> list[Any]:
        """Ask every other worker (``cancel_query``, ``queries``); their answers concatenated."""
        ...


class Registry:
    """Every open session of this process: for CancelRequest, CANCEL QUERY and SHOW QUERIES."""

    def __init__(self, index: int = 0, cluster: Cluster | None = None) -> None:
        self.index = index
        self.cluster = cluster
        self.sessions: dict[int, PgSession] = {}
        self._auth_conn: Connection | None = None
        self._auth_lock = threading.Lock()

    def new_key(self) -> tuple[int, int]:
        """A (process id, secret) pair for BackendKeyData, the process id naming this worker."""
        while True:
            rnd = struct.unpack("!i", os.urandom(4))[0] & 0x7FFFFFFF
            pid = (rnd & ~((1 << WORKER_BITS) - 1)) | self.index
            if pid and pid not in self.sessions:
                return pid, secrets.randbits(32)

    # ------------------------------------------------------------------ cancelling
    def cancel_by_key(self, pid: int, key: int) -> None:
        s = self.sessions.get(pid)
        if s is not None:
            if s.secret == key:
                s.cancel()
            return
        if self.cluster is not None and pid & ((1 << WORKER_BITS) - 1) != self.index:
            self.cluster.forward_cancel(pid, key)

    def cancel_local_query(self, query_id: str) -> bool:
        for s in list(self.sessions.values()):
            if s.running is not None and s.running.query_id == query_id:
                s.cancel()
                return True
        return False

    async def cancel_by_query_id(self, query_id: str) -> bool:
        if self.cancel_local_query(query_id):
            return True
        if self.cluster is not None:
            return any(await self.cluster.ask("cancel_query", query_id))
        return False

    # ------------------------------------------------------------------ SHOW QUERIES
    def local_queries(self) -> list[list[Any]]:
        """The running statements of this process, as rows of :data:`QUERY_COLUMNS` (JSON-able:
        the start time as ISO 8601 text)."""
        rows: list[list[Any]] = []
        for s in list(self.sessions.values()):
            r = s.running
            if r is None:
                continue
            peer = s.peer
            addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else ""
            rows.append(
                [
                    r.query_id,
                    1,
                    s.session_id,
                    s.user,
                    r.start.isoformat(),
                    r.sql,
                    addr,
                    s.vars.get("application_name", ""),
                    False,
                    r.phase,
                ]
            )
        return rows

    async def queries(self) -> Result:
        """SHOW QUERIES over every process of the endpoint."""
        rows = self.local_queries()
        if self.cluster is not None:
            rows += [r for r in await self.cluster.ask("queries") if isinstance(r, list)]
        out = [(*r[:4], dt.datetime.fromisoformat(r[4]), *r[5:]) for r in rows]
        return Result(
            columns=list(QUERY_COLUMNS),
            rows=out,
            types=[None] * len(QUERY_COLUMNS),
            status=f"SELECT {len(out)}",
        )

    async def answer(self, what: str, arg: Any) -> list[Any]:
        """This process's answer to another worker's question (see :meth:`Cluster.ask`)."""
        if what == "cancel_query":
            return [self.cancel_local_query(str(arg))]
        if what == "queries":
            return list(self.local_queries())
        return []

    # ------------------------------------------------------------------ authentication
    def secret_of(self, db: Path, user: str) -> ScramSecret | None:
        with self._auth_lock:
            if self._auth_conn is None:
                self._auth_conn = Connection(db, user=auth.ROOT)
            c = self._auth_conn.db.conn
            if not auth.user_exists(c, user):
                return None
            return auth.scram_secret(c, user)

    def close(self) -> None:
        with self._auth_lock:
            if self._auth_conn is not None:
                self._auth_conn.close()
                self._auth_conn = None
