"""The clauses of a SELECT that shape its rows once they are read: GROUP BY (and HAVING), the
grouping rule, ORDER BY items and sorting, DISTINCT ON, LIMIT and OFFSET, and the select list's
column labels (``sql.statements.select`` runs them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from changefeed.engine.type_errors import sql_text, value_type
from changefeed.engine.types import SqlType
from changefeed.exceptions import (
    AmbiguousColumn,
    DatatypeMismatch,
    GroupingError,
    InvalidColumnReference,
    InvalidStatement,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import (
    AMBIGUOUS,
    Evaluator,
    Scope,
    distinct_key,
    has_aggregate,
    order_key,
    subexpressions,
)
from changefeed.sql.function_errors import invalid_argument
from changefeed.sql.functions import AGGREGATES
from changefeed.sql.session import Session


def grouped(
    evaluator: Evaluator,
    scopes: list[Scope],
    group_by: tuple[ast.Expr, ...],
    items: list[ast.Expr],
    having: ast.Expr | None = None,
    *,
    whole: bool = False,
) -> list[tuple[Any, ...]]:
    """``GROUP BY``: one output row per distinct value of the grouping expressions, in the order
    groups first appear; aggregates run over the group's rows, other expressions on its first.
    ``whole``: every row is one group, also when there are none (an aggregate without GROUP BY:
    ``count(*)`` of no rows is 0). ``having`` keeps the groups for which it is true."""
    groups: dict[tuple[Any, ...], list[Scope]] = {(): []} if whole else {}
    for sc in scopes:
        groups.setdefault(tuple(evaluator.eval(g, sc) for g in group_by), []).append(sc)
    out = []
    for members in groups.values():
        if having is not None:
            keep = evaluator.eval_aggregate(having, members)
            if keep is not None and not isinstance(keep, bool):
                raise DatatypeMismatch(f"argument of HAVING must be type bool, not type {value_type(keep)}")
            if keep is not True:
                continue
        out.append(tuple(evaluator.eval_aggregate(e, members) for e in items))
    return out


def limit_count(evaluator: Evaluator, e: ast.Expr | None, clause: str) -> int | None:
    """A LIMIT or OFFSET: a non-negative integer (None without the clause, or with NULL: no
    limit, as PostgreSQL reads ``LIMIT NULL``)."""
    if e is None:
        return None
    n = evaluator.eval(e, None)
    if n is None:
        return None
    if not isinstance(n, int) or isinstance(n, bool):
        raise InvalidStatement(f"{clause} must be a non-negative integer, not {sql_text(n)}")
    if n < 0:  # PostgreSQL's words and codes: 2201W for LIMIT, 2201X for OFFSET
        raise invalid_argument(f"{clause} must not be negative", "2201W" if clause == "LIMIT" else "2201X")
    return n


def order_item(
    session: Session, o: ast.OrderItem, items: list[tuple[str, ast.Expr, SqlType | None]]
) -> ast.OrderItem:
    """An ORDER BY item as PostgreSQL and CockroachDB read it: ``ORDER BY 2`` is the select
    list's second expression, and a bare name that is an output column's name is that column's
    expression (``SELECT n + 1 AS x .. ORDER BY x``; an output name wins over an input column's,
    the other way round from GROUP BY)."""
    e = o.expr
    if isinstance(e, ast.Literal) and isinstance(e.value, int) and not isinstance(e.value, bool):
        if not 1 <= e.value <= len(items):
            raise InvalidColumnReference(f"ORDER BY position {e.value} is not in select list")
        return replace(o, expr=items[e.value - 1][1])
    if isinstance(e, ast.Column) and e.table is None:
        name = session.ident(e.name)
        named: list[ast.Expr] = []
        for label, x, _ in items:
            if label == name and x not in named:
                named.append(x)
        if len(named) > 1:
            raise AmbiguousColumn(f'ORDER BY "{name}" is ambiguous')
        if named:
            return replace(o, expr=named[0])
    return o


def check_distinct_order(
    session: Session,
    order_by: tuple[ast.OrderItem, ...],
    items: list[tuple[str, ast.Expr, SqlType | None]],
    index: Mapping[str, int],
    lower_index: Mapping[str, int],
) -> None:
    """``SELECT DISTINCT``: every ORDER BY expression must be one of the select list's (a
    column by any of its names), as PostgreSQL requires (42P10): a row's order must follow from
    the values DISTINCT keeps."""
    exprs = [e for _, e, _ in items]
    columns = {column_at(session, e, index, lower_index) for e in exprs} - {None}
    for o in order_by:
        if o.expr in exprs:
            continue
        at = column_at(session, o.expr, index, lower_index)
        if at is None or at not in columns:
            raise InvalidColumnReference(
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
            )


def distinct_on(
    session: Session,
    evaluator: Evaluator,
    rows: list[tuple[Any, ...]],
    scope: Callable[[tuple[Any, ...]], Scope],
    on: tuple[ast.Expr, ...],
    order_by: tuple[ast.OrderItem, ...],
    items: list[tuple[str, ast.Expr, SqlType | None]],
) -> list[tuple[Any, ...]]:
    """``DISTINCT ON (..)``: the first of the (sorted) rows for each distinct value of ``on``,
    whose expressions read as ORDER BY items do (positions, output names) and must be the
    leftmost ORDER BY items, as PostgreSQL requires (42P10)."""
    exprs = [order_item(session, ast.OrderItem(e), items).expr for e in on]
    for o in order_by[: len(exprs)]:
        if o.expr not in exprs:
            raise InvalidColumnReference(
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
            )
    kept: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in rows:
        sc = scope(r)
        kept.setdefault(tuple(distinct_key(evaluator.eval(e, sc)) for e in exprs), r)
    return list(kept.values())


def group_item(
    session: Session,
    g: ast.Expr,
    items: list[tuple[str, ast.Expr, SqlType | None]],
    index: Mapping[str, int],
    lower_index: Mapping[str, int],
) -> ast.Expr:
    """A ``GROUP BY`` item as PostgreSQL and CockroachDB read it: an integer constant is a
    position in the select list (``GROUP BY 1``), and a bare name that is no column of the
    input but an output column's name is that output column's expression (an input column
    wins when both are)."""
    if isinstance(g, ast.Literal) and isinstance(g.value, int) and not isinstance(g.value, bool):
        if not 1 <= g.value <= len(items):
            raise InvalidColumnReference(f"GROUP BY position {g.value} is not in select list")
        e = items[g.value - 1][1]
        if has_aggregate(e):
            raise GroupingError("aggregate functions are not allowed in GROUP BY")
        return e
    if isinstance(g, ast.Column) and g.table is None and column_at(session, g, index, lower_index) is None:
        name = session.ident(g.name)
        named = [e for label, e, _ in items if label == name]
        if len(named) == 1 and not has_aggregate(named[0]):
            return named[0]
    return g


def check_grouped(
    session: Session,
    pk_columns: Sequence[str],
    exprs: tuple[ast.Expr | None, ...],
    group_by: tuple[ast.Expr, ...],
    index: Mapping[str, int],
    lower_index: Mapping[str, int],
) -> None:
    """In a grouped SELECT, every column the select list or HAVING reads outside an aggregate
    must be grouped by, or belong to an expression grouped by, as in PostgreSQL and CockroachDB
    (``42803``); grouping by the whole primary key groups every column of the table (its
    functional dependency). CQL keeps ScyllaDB's rule (any column: the group's first row's).
    Joins are not checked."""
    grouped_at = {column_at(session, g, index, lower_index) for g in group_by}
    key = [index.get(c) for c in pk_columns]
    if key and all(k is not None and k in grouped_at for k in key):
        return

    def check(e: Any) -> None:
        if e is None or isinstance(e, ast.Literal | ast.Param) or e in group_by:
            return
        if isinstance(e, ast.WindowCall):  # computed over the groups: what it reads, per group
            for x in (*e.call.args, e.call.filter, *e.partition_by, *(o.expr for o in e.order_by)):
                check(x)
            return
        if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
            return
        if isinstance(e, ast.Column):
            if column_at(session, e, index, lower_index) not in grouped_at:
                raise GroupingError(
                    f'column "{session.ident(e.name)}" must appear in the GROUP BY clause'
                    " or be used in an aggregate function"
                )
            return
        for x in subexpressions(e):
            check(x)

    for e in exprs:
        check(e)


def order_output(
    rows: list[tuple[Any, ...]],
    order_by: tuple[ast.OrderItem, ...],
    exprs: list[ast.Expr],
    names: list[str],
) -> list[tuple[Any, ...]]:
    """Order a grouped query's output by ORDER BY items that are one of its select list's
    expressions or name one of its columns."""
    lowered = [n.lower() for n in names]
    for o in reversed(order_by):
        e = o.expr
        at = next((i for i, x in enumerate(exprs) if x == e), None)
        if at is None and isinstance(e, ast.Column) and e.name.name.lower() in lowered:
            at = lowered.index(e.name.name.lower())
        if at is None:
            raise InvalidStatement("ORDER BY of a grouped query must name one of its select list's columns")
        column: int = at

        def key(r: tuple[Any, ...], i: int = column, o: ast.OrderItem = o) -> tuple[int, Any]:
            return order_key(r[i], o)

        rows.sort(key=key, reverse=o.descending)
    return rows


def column_at(
    session: Session, e: ast.Expr, index: Mapping[str, int], lower_index: Mapping[str, int]
) -> int | None:
    """The row position a plain column reference reads, resolved as the evaluator would."""
    if not isinstance(e, ast.Column):
        return None
    name = session.ident(e.name)
    if e.table is not None:
        qualified = index.get(f"{session.ident(e.table)}.{name}")
        if qualified is not None:
            return qualified
    at = index.get(name)
    if at is None:
        at = lower_index.get(name.lower())
    return None if at is None or at == AMBIGUOUS else at


def label(session: Session, it: ast.SelectItem) -> str:
    """A result column's name, as PostgreSQL's FigureColname makes it: the alias, else what the
    expression is named by (a column, a function), else a cast's type or ``case``."""
    if it.alias is not None:
        return session.ident(it.alias)
    return _named(session, it.expr)[0]


def _named(session: Session, e: ast.Expr) -> tuple[str, int]:
    """The name and how strongly it names (2: a column or function, 1: a cast's type or
    ``case``, 0: nothing): a cast keeps its operand's strong name (``id::text`` is ``id``)."""
    if isinstance(e, ast.WindowCall):
        e = e.call
    if isinstance(e, ast.Subquery) and e.kind in ("scalar", "exists"):
        # PostgreSQL names ``(SELECT x ..)`` by its column, ``EXISTS (..)`` "exists"
        if e.kind == "exists":
            return "exists", 2
        q = e.query
        if not isinstance(q, ast.Select) or not q.items or isinstance(q.items[0].expr, ast.Star):
            return "?column?", 0
        return label(session, q.items[0]), 2
    if isinstance(e, ast.Column):
        return session.ident(e.name), 2
    if isinstance(e, ast.FuncCall):
        return (e.name.lower() if session.dialect == "cql" or e.name.lower() in AGGREGATES else e.name), 2
    if isinstance(e, ast.Cast):
        inner, strength = _named(session, e.expr)
        return (inner, strength) if strength > 1 else (e.type.name.lower(), 1)
    if isinstance(e, ast.Case):
        return "case", 1  # as PostgreSQL and CockroachDB name it
    if isinstance(e, ast.Subscript):  # arr[1] is named as arr is
        return _named(session, e.expr)
    if isinstance(e, ast.ArrayLit):
        return "array", 2
    return "?column?", 0
