"""Where the SQL executor hands changefeed statements to the feeds package.

The executor stays ignorant of feed options and topics: it calls these functions inside the
statement's transaction, so a feed is created or dropped atomically with the statement. Topics
are created/dropped in the topic store right after the catalog change (the topic store is its
own set of files; ``changefeed run`` re-ensures topics of every feed and removes orphans).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from changefeed.exceptions import DuplicateObject, UndefinedObject, UnsupportedFeature
from changefeed.feeds.spec import FeedSpec, parse_ydb_options
from changefeed.feeds.store import feeds_of_table

if TYPE_CHECKING:
    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.txn import Transaction
    from changefeed.sql import ast
    from changefeed.sql.executor import Result, Session


def on_drop_table(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """Dropping a table drops its changefeeds and their topics; a CockroachDB job watching it fails."""
    feeds = feeds_of_table(txn.conn, schema.id)
    from changefeed.feeds import jobs

    jobs.on_table_dropped(txn.conn, {f.id for f in feeds}, schema.short_name, session.db.clock.now_ns())
    txn.conn.execute(
        "DELETE FROM _progress WHERE feed_id IN (SELECT id FROM _feeds WHERE table_id = ?)", (schema.id,)
    )
    txn.conn.execute("DELETE FROM _feeds WHERE table_id = ?", (schema.id,))
    _drop_topics(session, [f.topic for f in feeds])


def alter_changefeed(
    session: Session, txn: Transaction, schema: TableSchema, action: Any, ev: Any
) -> TableSchema:
    from changefeed.sql import ast

    name = session._ident(action.name)
    existing = {f.name: f for f in feeds_of_table(txn.conn, schema.id)}
    if isinstance(action, ast.DropChangefeed):
        feed = existing.get(name)
        if feed is None:
            raise UndefinedObject(f"changefeed {name!r} does not exist on table {schema.name}")
        txn.conn.execute("DELETE FROM _progress WHERE feed_id = ?", (feed.id,))
        txn.conn.execute("DELETE FROM _feeds WHERE id = ?", (feed.id,))
        if len(existing) == 1 and not schema.options.get("changes"):
            txn.conn.execute(f"DROP TABLE IF EXISTS x{schema.id}")
            schema = session.enable_changes(txn, schema, False)
        _drop_topics(session, [feed.topic])
        return schema
    if name in existing:
        raise DuplicateObject(f"changefeed {name!r} already exists on table {schema.name}")
    options = {k: session._option_value(v, ev) for k, v in action.options}
    spec = parse_ydb_options(schema, name, options)
    if not schema.changes:
        schema = session.enable_changes(txn, schema, True)
    seq = txn.conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{schema.id}").fetchone()[0]
    assert txn.ts is not None
    spec = spec.with_ids(
        created_seq=seq, created_wall=txn.ts.wall, created_logical=txn.ts.logical, created_tx=txn.txid
    )
    cur = txn.conn.execute(
        "INSERT INTO _feeds (table_id, name, kind, spec, state, created_wall, created_logical, created_seq)"
        " VALUES (?, ?, ?, '{}', ?, ?, ?, ?)",
        (
            schema.id,
            name,
            spec.kind,
            "scanning" if spec.initial_scan else "running",
            txn.ts.wall,
            txn.ts.logical,
            seq,
        ),
    )
    spec = spec.with_ids(id=int(cur.lastrowid or 0))
    txn.conn.execute(
        "UPDATE _feeds SET spec = ? WHERE id = ?", (orjson.dumps(spec.to_json()).decode(), spec.id)
    )
    _ensure_topic(session, spec)
    return schema


def _topic_store(session: Session) -> Any:
    from changefeed.topics import TopicStore

    return TopicStore(session.db.path)


def _ensure_topic(session: Session, spec: FeedSpec) -> None:
    _topic_store(session).ensure_topic(spec.topic, spec.partitions, spec.retention_ns)


def _drop_topics(session: Session, topics: list[str]) -> None:
    store = _topic_store(session)
    for t in topics:
        store.drop_topic(t, missing_ok=True)


def create_changefeed(session: Session, txn: Transaction, stmt: ast.CreateChangefeed, ev: Any) -> Result:
    if stmt.sink is not None and not stmt.core:
        from changefeed.feeds.job_statements import create_job

        return create_job(session, txn, stmt, ev)
    raise UnsupportedFeature(
        "CREATE CHANGEFEED / EXPERIMENTAL CHANGEFEED FOR (CockroachDB) are not available yet"
    )


def show_feeds(session: Session, txn: Transaction) -> Result:
    from changefeed.sql.executor import Result

    rows = []
    for r in txn.conn.execute(
        "SELECT f.id, c.name, f.name, f.kind, f.state FROM _feeds f JOIN _catalog c ON c.id = f.table_id ORDER BY f.id"
    ):
        rows.append(tuple(r))
    return Result(columns=["id", "table", "name", "kind", "state"], rows=rows, types=[None] * 5)
