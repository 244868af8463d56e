"""CockroachDB changefeeds: ``CREATE CHANGEFEED FOR ... [INTO sink] [WITH ...]``, ``EXPERIMENTAL
CHANGEFEED FOR ...``, and ``SHOW CHANGEFEED JOBS`` / ``SHOW JOBS``."""

from __future__ import annotations

from changefeed.engine.txn import Transaction
from changefeed.exceptions import UnsupportedFeature
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily

FAMILY = StatementFamily("crdb_feeds")


@FAMILY.statement(ast.CreateChangefeed)
def create_changefeed(session: Session, txn: Transaction, s: ast.CreateChangefeed, ev: Params) -> Result:
    raise UnsupportedFeature(
        "CREATE CHANGEFEED / EXPERIMENTAL CHANGEFEED FOR (CockroachDB) are not available yet"
    )


@FAMILY.show("changefeed jobs", "changefeeds", "jobs")
def show_jobs(session: Session, txn: Transaction, s: ast.Show) -> Result:
    """Every feed of the database (YDB and CockroachDB) with its state."""
    rows = [
        tuple(r)
        for r in txn.conn.execute(
            "SELECT f.id, c.name, f.name, f.kind, f.state FROM _feeds f"
            " JOIN _catalog c ON c.id = f.table_id ORDER BY f.id"
        )
    ]
    return Result(columns=["id", "table", "name", "kind", "state"], rows=rows, types=[None] * 5)
