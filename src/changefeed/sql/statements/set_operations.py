"""``UNION``, ``INTERSECT`` and ``EXCEPT`` (with ``ALL``: as multisets), as PostgreSQL and
CockroachDB combine query results: both sides must give the same number of columns (42601); the
result takes the left side's column names; rows compare as DISTINCT compares them (NULLs equal);
without ``ALL`` the result has no duplicates. ``ORDER BY`` (a position or an output column's
name), ``LIMIT`` and ``OFFSET`` apply to the whole result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from decimal import Decimal
from typing import Any

from changefeed.engine.txn import Transaction
from changefeed.exceptions import (
    ColumnCountMismatch,
    InvalidColumnReference,
    InvalidTextRepresentation,
    UnsupportedFeature,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Params
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import select, select_clauses

FAMILY = StatementFamily("set_operations")


@FAMILY.statement(ast.SetOperation, write=False)
def set_operation(session: Session, txn: Transaction, s: ast.SetOperation, ev: Params) -> Result:
    left, right = _side(session, txn, s.left, ev), _side(session, txn, s.right, ev)
    if len(left.columns) != len(right.columns):
        raise ColumnCountMismatch(f"each {s.op.upper()} query must have the same number of columns")
    # a column's type where both sides agree (or one says nothing); else none, and the values
    # tell their own
    types = [
        b if a is None else a if b is None or a == b else None
        for a, b in zip(
            left.types or [None] * len(left.columns), right.types or [None] * len(right.columns), strict=True
        )
    ]
    both = _unified([*left.rows, *right.rows], types)  # before the rows are compared
    rows = _combine(s.op, s.all, both[: len(left.rows)], both[len(left.rows) :])
    if s.order_by:
        names = list(left.columns)
        order_by = tuple(_output_column(o, names) for o in s.order_by)
        rows = select_clauses.order_output(
            rows, order_by, [ast.Column(ast.Ident(n, True)) for n in names], names
        )
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    skip = select_clauses.limit_count(evaluator, s.offset, "OFFSET") or 0
    limit = select_clauses.limit_count(evaluator, s.limit, "LIMIT")
    if skip or limit is not None:
        rows = rows[skip : None if limit is None else skip + limit]
    return Result(
        columns=list(left.columns), rows=rows, types=types, status=f"SELECT {len(rows)}", rowcount=len(rows)
    )


_NUMBER_NAMES = {int: "integer", float: "double precision", Decimal: "numeric"}


def _unified(rows: list[tuple[Any, ...]], types: list[Any]) -> list[tuple[Any, ...]]:
    """A column whose sides disagree on numbers and text (``SELECT 1 UNION SELECT 'a'``) takes
    the number's type, as PostgreSQL resolves a literal against a typed column: the text is
    read as that number, or the statement fails with 22P02, instead of a column of one type
    holding values of another."""
    fixes: dict[int, type] = {}
    for i, t in enumerate(types):
        if t is not None:
            continue
        kinds = {type(r[i]) for r in rows if r[i] is not None}
        numbers = kinds - {str}
        if str in kinds and numbers and numbers <= {int, float, Decimal}:
            fixes[i] = Decimal if Decimal in numbers else float if float in numbers else int
    if not fixes:
        return rows
    out = []
    for r in rows:
        row = list(r)
        for i, kind in fixes.items():
            v = row[i]
            if isinstance(v, str):
                try:
                    row[i] = kind(v.strip())
                except (ValueError, ArithmeticError):
                    raise InvalidTextRepresentation(
                        f'invalid input syntax for type {_NUMBER_NAMES[kind]}: "{v}"'
                    ) from None
        out.append(tuple(row))
    return out


def _side(session: Session, txn: Transaction, q: ast.Select | ast.SetOperation, ev: Params) -> Result:
    if isinstance(q, ast.SetOperation):
        return set_operation(session, txn, q, ev)
    return select.select(session, txn, q, ev)


def _key(row: tuple[Any, ...]) -> tuple[Hashable, ...]:
    """A row as a dictionary key: arrays and maps by their items."""
    return tuple(repr(v) if isinstance(v, list | dict | set) else v for v in row)


def _combine(
    op: str, all_: bool, left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    if op == "union" and all_:
        return [*left, *right]
    out: list[tuple[Any, ...]] = []
    seen: set[tuple[Hashable, ...]] = set()
    if op == "union":
        for r in [*left, *right]:
            k = _key(r)
            if k not in seen:
                seen.add(k)
                out.append(r)
        return out
    theirs = Counter(_key(r) for r in right)
    for r in left:
        k = _key(r)
        if all_:
            if (theirs[k] > 0) == (op == "intersect"):
                out.append(r)
            if theirs[k] > 0:
                theirs[k] -= 1
            continue
        if k in seen:
            continue
        if (k in theirs) == (op == "intersect"):
            out.append(r)
            seen.add(k)
    return out


def _output_column(o: ast.OrderItem, names: list[str]) -> ast.OrderItem:
    """An ORDER BY item of a set operation: a position, or the name of a result column."""
    e = o.expr
    if isinstance(e, ast.Literal) and isinstance(e.value, int) and not isinstance(e.value, bool):
        if not 1 <= e.value <= len(names):
            raise InvalidColumnReference(f"ORDER BY position {e.value} is not in select list")
        return ast.OrderItem(ast.Column(ast.Ident(names[e.value - 1], True)), o.descending, o.nulls_first)
    if isinstance(e, ast.Column) and e.table is None:
        return o
    raise UnsupportedFeature(
        "ORDER BY of a UNION, INTERSECT or EXCEPT must name a result column or its position"
    )
