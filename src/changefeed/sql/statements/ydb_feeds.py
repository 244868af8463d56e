"""YDB changefeeds: ``ALTER TABLE t ADD CHANGEFEED name WITH (...)`` / ``DROP CHANGEFEED name``.

The statements run inside the ALTER TABLE's transaction, so a feed is created or dropped
atomically with it. Topics are created/dropped in the topic store right after the catalog change
(the topic store is its own set of files; ``changefeed run`` re-ensures topics of every feed and
removes orphans); a dropped feed's topic goes only once the transaction commits. Options are
parsed and validated by ``changefeed.feeds.spec``.
"""

from __future__ import annotations

from changefeed.engine.catalog import TableSchema
from changefeed.engine.phoenix import cdc_of
from changefeed.engine.privileges import Privilege
from changefeed.engine.txn import Transaction
from changefeed.exceptions import DuplicateObject, UndefinedObject
from changefeed.feeds.spec import FeedSpec, parse_ydb_options
from changefeed.feeds.store import delete_feed, delete_table_feeds, feeds_of_table, insert_feed
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import enable_changes
from changefeed.topics import TopicStore

FAMILY = StatementFamily("ydb_feeds")


@FAMILY.alter_action(ast.AddChangefeed)
def add_changefeed(
    session: Session, txn: Transaction, schema: TableSchema, action: ast.AddChangefeed, ev: Params
) -> TableSchema:
    session.require(txn, schema, Privilege.CHANGEFEED)
    name = session.ident(action.name)
    if any(f.name == name for f in feeds_of_table(txn.conn, schema.id)):
        raise DuplicateObject(f'changefeed "{name}" already exists on table {schema.name}')
    options = {k: session.option_value(v, ev) for k, v in action.options}
    spec = parse_ydb_options(schema, name, options)
    if not schema.changes:
        schema = enable_changes(session, txn, schema, True)
    seq = txn.conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{schema.id}").fetchone()[0]
    assert txn.ts is not None
    spec = spec.with_ids(
        created_seq=seq, created_wall=txn.ts.wall, created_logical=txn.ts.logical, created_tx=txn.txid
    )
    spec = insert_feed(txn.conn, spec, "scanning" if spec.initial_scan else "running")
    _ensure_topic(session, spec)
    return schema


@FAMILY.alter_action(ast.DropChangefeed)
def drop_changefeed(
    session: Session, txn: Transaction, schema: TableSchema, action: ast.DropChangefeed, ev: Params
) -> TableSchema:
    session.require(txn, schema, Privilege.CHANGEFEED)
    name = session.ident(action.name)
    existing = {f.name: f for f in feeds_of_table(txn.conn, schema.id)}
    feed = existing.get(name)
    if feed is None:
        raise UndefinedObject(f'changefeed "{name}" does not exist on table {schema.name}')
    delete_feed(txn.conn, feed.id)
    # The change stream stays while an Apache Phoenix CDC object reads it (issue 11).
    # A CockroachDB table keeps its history (engine/gc.py) unless created WITH (changes = false).
    if (
        len(existing) == 1
        and not schema.crdb_history
        and not schema.options.get("changes")
        and cdc_of(schema) is None
    ):
        txn.conn.execute(f"DROP TABLE IF EXISTS x{schema.id}")
        schema = enable_changes(session, txn, schema, False)
    _drop_topics(session, txn, [feed.topic])
    return schema


@FAMILY.on_drop_table
def on_drop_table(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """Dropping a table drops its changefeeds and their topics."""
    _drop_topics(session, txn, [f.topic for f in delete_table_feeds(txn.conn, schema.id)])


def _ensure_topic(session: Session, spec: FeedSpec) -> None:
    TopicStore(session.db.path).ensure_topic(spec.topic, spec.partitions, spec.retention_ns)


def _drop_topics(session: Session, txn: Transaction, topics: list[str]) -> None:
    """Topics go once the statement's transaction commits (a rollback keeps them and their records)."""
    path = session.db.path

    def drop() -> None:
        store = TopicStore(path)
        for t in topics:
            store.drop_topic(t, missing_ok=True)

    if topics:
        txn.after_commit(drop)
