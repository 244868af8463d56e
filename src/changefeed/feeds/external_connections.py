"""CockroachDB's external connections: ``CREATE EXTERNAL CONNECTION name AS 'uri'`` names a sink URI
that ``CREATE CHANGEFEED .. INTO 'external://name'`` uses (CockroachDB's
``system.external_connections``; ``pkg/cloud/externalconn``).

The name is the ``external://`` URI's host part, as CockroachDB takes it (``external://kafka`` ->
``kafka``); the stored URI is resolved when a changefeed job is created, and the job keeps the
``external://`` form in its description as CockroachDB does.
"""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit

from changefeed.exceptions import DuplicateObject, UndefinedObject

SCHEME = "external"

_DDL = (
    "CREATE TABLE IF NOT EXISTS _external_connections (name TEXT PRIMARY KEY, uri TEXT NOT NULL,"
    " owner TEXT NOT NULL, created INTEGER NOT NULL)"
)


def _ensure(conn: sqlite3.Connection) -> None:
    conn.execute(_DDL)


def create(
    conn: sqlite3.Connection, name: str, uri: str, owner: str, now_ns: int, *, if_not_exists: bool
) -> bool:
    """Store ``name``; False when it exists and ``if_not_exists`` (CockroachDB's error otherwise)."""
    _ensure(conn)
    if conn.execute("SELECT 1 FROM _external_connections WHERE name = ?", (name,)).fetchone():
        if if_not_exists:
            return False
        raise DuplicateObject(f"external connection with connection name {name} already exists")
    conn.execute("INSERT INTO _external_connections VALUES (?, ?, ?, ?)", (name, uri, owner, now_ns))
    return True


def drop(conn: sqlite3.Connection, name: str, *, if_exists: bool) -> None:
    _ensure(conn)
    if (
        conn.execute("DELETE FROM _external_connections WHERE name = ?", (name,)).rowcount == 0
        and not if_exists
    ):
        raise UndefinedObject(f"external connection with name {name} does not exist")


def is_external(uri: str) -> bool:
    return uri.split("://", 1)[0].lower() == SCHEME if "://" in uri else False


def resolve(conn: sqlite3.Connection, uri: str) -> str:
    """The URI ``external://name`` stands for (any other URI as is)."""
    if not is_external(uri):
        return uri
    name = urlsplit(uri).netloc
    _ensure(conn)
    row = conn.execute("SELECT uri FROM _external_connections WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise UndefinedObject(f"external connection with name {name} does not exist")
    return str(row[0])


__all__ = ["SCHEME", "create", "drop", "is_external", "resolve"]
