"""CDC queries in the changefeed statements: ``CREATE CHANGEFEED [INTO sink] [WITH ..] AS SELECT
projection FROM table [WHERE predicate]``, as a job (``crdb_jobs``) or sinkless (``crdb_feeds``).

:func:`plan_query` parses the SELECT clause (:mod:`changefeed.sql.cdc_parse`), resolves its one
table, and checks it against the table (:mod:`changefeed.sql.cdc_check`), inside the
statement's transaction: the resulting :class:`~changefeed.feeds.cdc_plan.CdcQuery` goes into
the feed spec, where the encoders evaluate it.
"""

from __future__ import annotations

from dataclasses import dataclass

from changefeed.engine.catalog import TableSchema
from changefeed.engine.txn import Transaction
from changefeed.exceptions import InvalidStatement, UndefinedTable, UnsupportedFeature
from changefeed.feeds.cdc_plan import CdcQuery
from changefeed.formats.crdb_json import families
from changefeed.sql import ast
from changefeed.sql.cdc_check import check_query
from changefeed.sql.cdc_parse import Query, parse_query
from changefeed.sql.session import Session

MULTI_TABLE = "CREATE CHANGEFEED ... AS SELECT ... is not supported for more than 1 table"
#: CockroachDB's documented limitation (CDC queries on tables with several column families).
MULTI_FAMILY = (
    "CDC queries are not supported on tables with more than one column family: "
    "CHANGEFEED targeting a table ({table}) with multiple column families"
)


@dataclass(frozen=True, slots=True)
class PlannedQuery:
    table: TableSchema
    query: CdcQuery


def parse(stmt: ast.CreateChangefeed) -> Query:
    assert stmt.query is not None
    return parse_query(stmt.query, line=stmt.query_pos.line or 1, column=stmt.query_pos.column or 1)


def plan_query(session: Session, txn: Transaction, stmt: ast.CreateChangefeed, *, job: bool) -> PlannedQuery:
    """Parse, resolve and check the statement's CDC query (in ``txn``)."""
    q = parse(stmt)
    if len(q.tables) != 1 or q.joins:
        raise UnsupportedFeature(MULTI_TABLE)
    ref = q.tables[0]
    name = ast.QName(tuple(ast.Ident(p, quoted=True) for p in ref.name))
    try:
        table = session.resolve_table(txn, name)
    except UndefinedTable:
        if job:
            raise UndefinedTable(
                f'failed to resolve targets in the CHANGEFEED stmt: table "{".".join(ref.name)}" does not exist'
            ) from None
        raise
    if len(families(table)) > 1:
        raise InvalidStatement(MULTI_FAMILY.format(table=table.short_name))
    assert txn.ts is not None
    query = check_query(
        q,
        table,
        enums=session.db.enums,
        creation=txn.ts,
        cluster_id=session.db.cluster_id(),
    )
    return PlannedQuery(table, query)


def description(stmt: ast.CreateChangefeed) -> str:
    """The ``AS SELECT ..`` tail of a job description."""
    assert stmt.query is not None
    return " AS " + " ".join(stmt.query.split())


__all__ = ["MULTI_FAMILY", "MULTI_TABLE", "PlannedQuery", "description", "parse", "plan_query"]
