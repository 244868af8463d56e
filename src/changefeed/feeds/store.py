"""Reading and updating feed definitions, state and progress in the database's ``_feeds`` tables."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import orjson

from changefeed.feeds.spec import FeedSpec


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
