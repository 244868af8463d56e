"""Reading and updating feed definitions, state and progress in the database's ``_feeds`` tables."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import orjson

from changefeed.feeds.spec import FeedSpec

#: ``_meta`` key counting changes to the set of feeds, their states and their jobs' statuses: a
#: pipeline re-reads its feeds when it moves (one indexed read per poll, not the feed list).
FEEDS_VERSION = "feeds_version"


def bump_feeds_version(conn: sqlite3.Connection) -> None:
    """Inside the write transaction that adds, drops or changes the state of a feed or job."""
    conn.execute(
        "INSERT INTO _meta (key, value) VALUES (?, 1) ON CONFLICT (key) DO UPDATE SET value = value + 1",
        (FEEDS_VERSION,),
    )


def feeds_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM _meta WHERE key = ?", (FEEDS_VERSION,)).fetchone()
    return 0 if row is None else int(row[0])


@dataclass(frozen=True, slots=True)
class FeedRow:
    spec: FeedSpec
    table: str
    state: str


def feeds_of_table(conn: sqlite3.Connection, table_id: int) -> list[FeedSpec]:
    return [
        FeedSpec.from_json(orjson.loads(s))
        for (s,) in conn.execute("SELECT spec FROM _feeds WHERE table_id = ? ORDER BY id", (table_id,))
    ]


def all_feeds(conn: sqlite3.Connection) -> list[FeedRow]:
    out = []
    for spec, table, state in conn.execute(
        "SELECT f.spec, c.name, f.state FROM _feeds f JOIN _catalog c ON c.id = f.table_id ORDER BY f.id"
    ):
        out.append(FeedRow(FeedSpec.from_json(orjson.loads(spec)), table, state))
    return out


def set_state(conn: sqlite3.Connection, feed_id: int, state: str) -> None:
    conn.execute("UPDATE _feeds SET state = ? WHERE id = ?", (state, feed_id))
    bump_feeds_version(conn)


def insert_feed(conn: sqlite3.Connection, spec: FeedSpec, state: str) -> FeedSpec:
    """Store a new feed (``spec.table_id``/``name``/``kind`` and creation point); returns the
    spec with its new id, stored as JSON."""
    cur = conn.execute(
        "INSERT INTO _feeds (table_id, name, kind, spec, state, created_wall, created_logical, created_seq)"
        " VALUES (?, ?, ?, '{}', ?, ?, ?, ?)",
        (
            spec.table_id,
            spec.name,
            spec.kind,
            state,
            spec.created_wall,
            spec.created_logical,
            spec.created_seq,
        ),
    )
    spec = spec.with_ids(id=int(cur.lastrowid or 0))
    conn.execute("UPDATE _feeds SET spec = ? WHERE id = ?", (orjson.dumps(spec.to_json()).decode(), spec.id))
    bump_feeds_version(conn)
    return spec


def delete_feed(conn: sqlite3.Connection, feed_id: int) -> None:
    """Forget a feed and its progress."""
    conn.execute("DELETE FROM _progress WHERE feed_id = ?", (feed_id,))
    conn.execute("DELETE FROM _feeds WHERE id = ?", (feed_id,))
    bump_feeds_version(conn)


def delete_table_feeds(conn: sqlite3.Connection, table_id: int) -> list[FeedSpec]:
    """Forget every feed of a table and their progress; returns what they were."""
    feeds = feeds_of_table(conn, table_id)
    conn.execute(
        "DELETE FROM _progress WHERE feed_id IN (SELECT id FROM _feeds WHERE table_id = ?)", (table_id,)
    )
    conn.execute("DELETE FROM _feeds WHERE table_id = ?", (table_id,))
    bump_feeds_version(conn)
    return feeds
