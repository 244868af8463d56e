"""The source side of an asynchronous replication, as the destination drives it (issue 20).

A :class:`SourceControl` describes source tables and creates or drops the changefeeds the
replication reads, on another database of this product:

* :class:`LocalSource` for ``file:///path``: the source directory opened here, statements run by
  a session of its own (the destination's own session when the source *is* the destination);
* :class:`NodeSource` for ``changefeed://HOST``: the source node's PostgreSQL endpoint, through
  psycopg, as the replication's ``USER`` (``root`` without one, which the node only trusts from
  its own loopback).

Both run the same YQL text on the source (``ALTER TABLE `t` ADD CHANGEFEED `<uuid>` WITH (..)``),
so a replication leaves exactly what a user running it by hand would. The source's table schema
comes from its ``.sys/table_schemas`` system view (the catalog entry as JSON): exact types, key and
partition count, which ``SHOW CREATE TABLE`` text would not round-trip for every dialect's types.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.database import DB_FILE, Database
from changefeed.engine.txn import Transaction
from changefeed.exceptions import ReplicationError, UndefinedTable
from changefeed.feeds.replication import SOURCE_RETENTION, Endpoint, ReplicationSpec
from changefeed.sql.evaluator import Params
from changefeed.sql.session import Session

#: Seconds to wait for the source node's PostgreSQL endpoint.
CONNECT_TIMEOUT_S = 10


class SourceControl(Protocol):
    def describe(self, path: str) -> TableSchema: ...

    def add_changefeed(self, path: str, name: str, options: str) -> None: ...

    def drop_changefeed(self, path: str, name: str) -> None: ...

    def close(self) -> None: ...


def quote(name: str) -> str:
    """A YQL identifier in backticks (``t``, ``ks.t`` as one name)."""
    return "`" + name.replace("`", "``") + "`"


def changefeed_options(spec: ReplicationSpec) -> str:
    """The changefeed options YDB's replication controller uses (``TStreamCreator``): UPDATES in
    JSON with the initial scan and a day of retention; GLOBAL adds virtual timestamps and barriers
    every COMMIT_INTERVAL."""
    opts = [
        "MODE = 'UPDATES'",
        "FORMAT = 'JSON'",
        "INITIAL_SCAN = TRUE",
        f"RETENTION_PERIOD = Interval('{SOURCE_RETENTION}')",
    ]
    if spec.global_:
        ms = max(1, spec.commit_interval_ns // 1_000_000)
        opts += ["VIRTUAL_TIMESTAMPS = TRUE", f"BARRIERS_INTERVAL = Interval('PT{ms / 1000:g}S')"]
    return ", ".join(opts)


def schema_from_json(text: str | bytes) -> TableSchema:
    return TableSchema.from_json(orjson.loads(text))


class LocalSource:
    """A database directory on this machine (``file:///path``)."""

    def __init__(self, dest: Session, path: str) -> None:
        p = Path(path)
        self.same = os.path.realpath(p) == os.path.realpath(dest.db.path)
        if not self.same and not (p / DB_FILE).is_file():
            raise ReplicationError(
                f"cannot reach the source: {p} is not a changefeed database (no {DB_FILE})"
            )
        self.db = dest.db if self.same else Database(p, create=False)
        self.session = dest if self.same else Session(self.db, dest.statements, user="root", dialect="sql")
        self.txn: Transaction | None = None

    def bind(self, txn: Transaction) -> None:
        """The destination's transaction: when the source is the destination itself, its
        statements run inside it (a second writer would wait for this one forever)."""
        if self.same:
            self.txn = txn

    def describe(self, path: str) -> TableSchema:
        self.db.refresh_catalog()
        schema = self.db.find_table(path)
        if schema is None:
            raise UndefinedTable(f'table "{path}" does not exist in the source database {self.db.path}')
        return schema

    def _run(self, sql: str) -> None:
        from changefeed.sql.parser import parse

        for stmt in parse(sql, "sql"):
            if self.txn is not None:
                self.session.statements.handler(stmt).run(self.session, self.txn, stmt, Params(()))
            else:
                self.session.execute(stmt)

    def add_changefeed(self, path: str, name: str, options: str) -> None:
        self._run(f"ALTER TABLE {quote(path)} ADD CHANGEFEED {quote(name)} WITH ({options})")

    def drop_changefeed(self, path: str, name: str) -> None:
        self._run(f"ALTER TABLE {quote(path)} DROP CHANGEFEED {quote(name)}")

    def close(self) -> None:
        if not self.same:
            self.session.close()
            self.db.close()


class NodeSource:
    """A node on another machine, through its PostgreSQL endpoint."""

    def __init__(
        self, endpoint: Endpoint, user: str | None, password: str | None, ca_cert: str | None
    ) -> None:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - a dependency of the package
            raise ReplicationError(
                "psycopg is needed to reach a source node; install changefeed again"
            ) from None
        self.endpoint = endpoint
        kw: dict[str, Any] = {
            "host": endpoint.host,
            "port": endpoint.pg_port,
            "dbname": endpoint.database,
            "user": user or "root",
            "connect_timeout": CONNECT_TIMEOUT_S,
            "autocommit": True,
            "application_name": "changefeed async replication",
        }
        if password is not None:
            kw["password"] = password
        if endpoint.tls:
            kw["sslmode"] = "verify-full" if ca_cert else "require"
            if ca_cert:
                kw["sslrootcert"] = _ca_file(ca_cert)
        else:
            kw["sslmode"] = "disable"
        try:
            self.conn = psycopg.connect(**kw)
        except psycopg.Error as exc:
            raise ReplicationError(f"cannot reach the source {endpoint.shown}: {_pg_text(exc)}") from None

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, params or None)
                return list(cur.fetchall()) if cur.description else []
        except psycopg.Error as exc:
            raise ReplicationError(
                f"the source {self.endpoint.shown} refused {sql.split(' (', 1)[0]!r}: {_pg_text(exc)}"
            ) from None

    def describe(self, path: str) -> TableSchema:
        rows = self._query("SELECT schema FROM `.sys/table_schemas` WHERE path = %s", (path,))
        if not rows:
            raise UndefinedTable(
                f'table "{path}" does not exist in the source database at {self.endpoint.shown}'
            )
        return schema_from_json(rows[0][0])

    def add_changefeed(self, path: str, name: str, options: str) -> None:
        self._query(f"ALTER TABLE {quote(path)} ADD CHANGEFEED {quote(name)} WITH ({options})")

    def drop_changefeed(self, path: str, name: str) -> None:
        self._query(f"ALTER TABLE {quote(path)} DROP CHANGEFEED {quote(name)}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def _pg_text(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    code = getattr(exc, "sqlstate", None)
    lines = str(exc).strip().splitlines()
    text = primary or (lines[0] if lines else type(exc).__name__)
    return f"{text} (SQLSTATE {code})" if code else text


def _ca_file(pem: str) -> str:
    """psycopg takes the CA as a file: a private one per PEM under the user's cache."""
    import hashlib

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "changefeed" / "ca"
    base.mkdir(parents=True, exist_ok=True)
    f = base / (hashlib.sha256(pem.encode()).hexdigest()[:32] + ".pem")
    if not f.exists():
        f.write_text(pem)
        f.chmod(0o600)
    return str(f)


def open_source(dest: Session, spec: ReplicationSpec, password: str | None) -> SourceControl:
    ep = spec.endpoint
    if ep.path is not None:
        return LocalSource(dest, ep.path)
    return NodeSource(ep, spec.user, password, spec.ca_cert)


def replica_schema(source: TableSchema, *, table_id: int, name: str) -> TableSchema:
    """The replica of ``source``: same columns, types and key; no changefeeds, change stream,
    ScyllaDB log, Phoenix CDC or TTL of its own (the source's expiries arrive as erases)."""
    options: dict[str, Any] = {}
    phoenix = source.options.get("phoenix")
    if isinstance(phoenix, dict):
        options["phoenix"] = {**phoenix, "cdc": [], "ttl_s": None, "max_lookback_ms": None}
    return replace(
        source,
        id=table_id,
        name=name,
        cdc=replace(source.cdc, enabled=False),
        changes=False,
        options=options,
        version=1,
    )


__all__ = [
    "LocalSource",
    "NodeSource",
    "SourceControl",
    "changefeed_options",
    "open_source",
    "quote",
    "replica_schema",
    "schema_from_json",
]
