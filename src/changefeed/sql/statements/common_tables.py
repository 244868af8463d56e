"""WITH queries that are more than their query (``sql/builder/with_queries.py`` inlines the
others): one with a column list, whose columns it renames, and a recursive one, run as
PostgreSQL runs ``WITH RECURSIVE``: the non-recursive term's rows, then the recursive term run
again and again over the rows the round before added (its *working table*: the query's own name
in its FROM) until a round adds none. With ``UNION`` (not ``ALL``) a row already produced is not
added again, so a recursion over a graph with cycles ends. A recursion that has produced
:data:`MAX_ROWS` rows is stopped with an error (PostgreSQL would run on until memory runs out)."""

from __future__ import annotations

import contextvars
from collections.abc import Hashable, Mapping
from types import MappingProxyType
from typing import Any

from changefeed.engine.txn import Transaction
from changefeed.engine.types import SqlType
from changefeed.exceptions import ColumnCountMismatch, InvalidColumnReference, StatementTooComplex
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily

FAMILY = StatementFamily("common_tables")

#: Rows a recursive WITH query may produce before it is stopped.
MAX_ROWS = 10_000_000

#: The working tables of the recursive queries running in this context, by name.
_WORKING: contextvars.ContextVar[Mapping[str, Result]] = contextvars.ContextVar(
    "working_tables", default=MappingProxyType({})
)


@FAMILY.statement(ast.CommonTableQuery, write=False)
def common_table(session: Session, txn: Transaction, s: ast.CommonTableQuery, ev: Params) -> Result:
    first = _run(session, txn, s.query, ev)
    columns = _columns(session, s, first.columns)
    types: list[SqlType | None] = list(first.types) if first.types else [None] * len(columns)
    rows = [tuple(r) for r in first.rows]
    if s.step is not None:
        rows = _recurse(session, txn, s, ev, columns, types, rows)
    return Result(columns=columns, rows=rows, types=types, status=f"SELECT {len(rows)}", rowcount=len(rows))


@FAMILY.statement(ast.WorkingTable, write=False)
def working_table(session: Session, txn: Transaction, s: ast.WorkingTable, ev: Params) -> Result:
    working = _WORKING.get().get(_name(s.name))
    if working is None:  # the builder puts one only in its own query's recursive term
        raise InvalidColumnReference(f'recursive reference to query "{s.name.name}" must not appear here')
    return working


def _recurse(
    session: Session,
    txn: Transaction,
    s: ast.CommonTableQuery,
    ev: Params,
    columns: list[str],
    types: list[SqlType | None],
    rows: list[tuple[Any, ...]],
) -> list[tuple[Any, ...]]:
    assert s.step is not None
    seen: set[tuple[Hashable, ...]] | None = None
    if not s.union_all:
        seen = set()
        rows = [r for r in rows if _fresh(r, seen)]
    working = rows
    key = _name(s.name)
    while working:
        token = _WORKING.set({**_WORKING.get(), key: Result(columns=columns, rows=working, types=types)})
        try:
            step = _run(session, txn, s.step, ev)
        finally:
            _WORKING.reset(token)
        if len(step.columns) != len(columns):
            raise ColumnCountMismatch("each UNION query must have the same number of columns")
        working = [tuple(r) for r in step.rows]
        if seen is not None:
            working = [r for r in working if _fresh(r, seen)]
        rows.extend(working)
        if len(rows) > MAX_ROWS:
            raise StatementTooComplex(
                f'recursive query "{s.name.name}" produced more than {MAX_ROWS} rows; is its recursion bounded?'
            )
    return rows


def _fresh(row: tuple[Any, ...], seen: set[tuple[Hashable, ...]]) -> bool:
    """Whether ``row`` was not produced before (``UNION``'s rule: NULLs equal), remembering it."""
    key = tuple(repr(v) if isinstance(v, list | dict) else v for v in row)
    if key in seen:
        return False
    seen.add(key)
    return True


def _columns(session: Session, s: ast.CommonTableQuery, given: list[str]) -> list[str]:
    if not s.columns:
        return list(given)
    if len(s.columns) > len(given):
        raise InvalidColumnReference(
            f'WITH query "{s.name.name}" has {len(given)} columns available but {len(s.columns)} columns specified'
        )
    return [session.ident(c) for c in s.columns] + list(given[len(s.columns) :])


def _run(session: Session, txn: Transaction, q: ast.Statement, ev: Params) -> Result:
    return session.statements.handler(q).run(session, txn, q, ev)


def _name(name: ast.Ident) -> str:
    return name.name if name.quoted else name.name.lower()
