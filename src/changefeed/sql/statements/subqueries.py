"""Subqueries in expressions, run once before the statement reads its rows.

``(SELECT ..)`` becomes its one value (NULL without a row; more than one row is PostgreSQL's
``21000``, more than one column ``42601``), ``EXISTS (SELECT ..)`` true or false, and
``x [NOT] IN (SELECT ..)`` an ``IN`` list of the values (SQL's NULL rules then apply as to any
``IN`` list). A subquery that reads the outer query's columns (correlated) is not supported: its
unknown column is reported with that said."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from changefeed.exceptions import CardinalityViolation, InvalidStatement, UndefinedColumn, UndefinedTable
from changefeed.sql import ast
from changefeed.sql.evaluator import subexpressions
from changefeed.sql.result import Result

__all__ = ["fold", "has_subquery"]

E = TypeVar("E")

#: Nodes that hold no expression (the common case, checked first: every statement asks).
_LEAVES = (ast.Literal, ast.Param, ast.Column, ast.Star)

#: Runs a subquery's SELECT in the statement's transaction, with its parameters.
RunQuery = Callable[[ast.Select], Result]


def has_subquery(e: Any) -> bool:
    """Whether an expression (or a tuple of them) holds a subquery anywhere."""
    if isinstance(e, _LEAVES) or e is None:
        return False
    if isinstance(e, ast.Subquery):
        return True
    return any(has_subquery(x) for x in subexpressions(e))


def fold(e: E, run: RunQuery) -> E:
    """``e`` with each subquery replaced by what it gives (see the module)."""
    if not has_subquery(e):
        return e
    return _fold(e, run)  # type: ignore[no-any-return]


def _fold(e: Any, run: RunQuery) -> Any:
    if isinstance(e, ast.Subquery):
        return _value_of(e, run)
    if isinstance(e, tuple):
        return tuple(_fold(x, run) for x in e)
    if not dataclasses.is_dataclass(e) or isinstance(e, type) or not has_subquery(e):
        return e
    return dataclasses.replace(e, **{f.name: _fold(getattr(e, f.name), run) for f in dataclasses.fields(e)})


def _value_of(sub: ast.Subquery, run: RunQuery) -> ast.Expr:
    try:
        res = run(sub.query)
    except (UndefinedColumn, UndefinedTable) as exc:
        raise type(exc)(f"{exc} (a subquery that reads the outer query's columns is not supported)") from None
    if sub.kind == "exists":
        return ast.Literal(bool(res.rows))
    if len(res.columns) != 1:
        raise InvalidStatement(f"subquery must return only one column, not {len(res.columns)}")
    values = [r[0] for r in res.rows]
    if sub.kind == "array":  # ``x = ANY (SELECT ..)``: the values, as an array
        return ast.Literal(values)
    if sub.kind == "in":
        assert sub.expr is not None
        return ast.InList(_fold(sub.expr, run), tuple(ast.Literal(v) for v in values), sub.negated)
    if len(values) > 1:
        raise CardinalityViolation("more than one row returned by a subquery used as an expression")
    return ast.Literal(values[0] if values else None)
