"""Where the SQL executor hands changefeed statements to the feeds package.

The executor stays ignorant of feed options and topics: it calls these functions inside the
statement's transaction, so a feed is created or dropped atomically with the statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from changefeed.exceptions import UnsupportedFeature

if TYPE_CHECKING:
    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.txn import Transaction
    from changefeed.sql import ast
    from changefeed.sql.executor import Result, Session


def on_drop_table(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """Dropping a table drops its changefeeds (their topics are removed after commit)."""
    txn.conn.execute("DELETE FROM _progress WHERE feed_id IN (SELECT id FROM _feeds WHERE table_id = ?)", (schema.id,))
    txn.conn.execute("DELETE FROM _feeds WHERE table_id = ?", (schema.id,))


def alter_changefeed(session: Session, txn: Transaction, schema: TableSchema, action: Any, ev: Any) -> TableSchema:
    raise UnsupportedFeature("ALTER TABLE .. ADD/DROP CHANGEFEED is not available yet")


def create_changefeed(session: Session, txn: Transaction, stmt: ast.CreateChangefeed, ev: Any) -> Result:
    raise UnsupportedFeature("CREATE CHANGEFEED / EXPERIMENTAL CHANGEFEED FOR are not available yet")


def show_feeds(session: Session, txn: Transaction) -> Result:
    from changefeed.sql.executor import Result

    return Result(columns=["table", "name", "kind", "state"], rows=[], types=[None] * 4)
