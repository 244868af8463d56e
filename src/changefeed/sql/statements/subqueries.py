"""Subqueries in expressions.

``(SELECT ..)`` becomes its one value (NULL without a row; more than one row is PostgreSQL's
``21000``, more than one column ``42601``), ``EXISTS (SELECT ..)`` true or false, ``x [NOT] IN
(SELECT ..)`` an ``IN`` list of the values (SQL's NULL rules then apply as to any ``IN`` list) and
``x op ANY|ALL (SELECT ..)`` an array of them.

A subquery that reads none of the outer query's columns runs once, before the statement reads
its rows (:func:`fold`). One that does (correlated: ``EXISTS (SELECT 1 FROM b WHERE b.a = a.id)``)
is kept, with the outer columns it reads (``Subquery.outer``: the names its own FROM does not
have, as SQL resolves a name in the innermost query that has it), and runs for each outer row
with those columns written in as the row's values (:func:`correlated_value`), so that a key
compared with an outer column is a point read. Its results are kept per distinct set of outer
values for the statement."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from changefeed.exceptions import CardinalityViolation, ColumnCountMismatch
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Scope, subexpressions
from changefeed.sql.result import Result

__all__ = ["Subqueries", "correlated_value", "evaluator_hook", "fold", "has_subquery", "written_in"]

E = TypeVar("E")

#: Nodes that hold no expression (the common case, checked first: every statement asks).
_LEAVES = (ast.Literal, ast.Param, ast.Column, ast.Star)


class Subqueries(Protocol):
    """How a statement's subqueries run: as SELECTs in its transaction, with its parameters."""

    def run(self, query: ast.Select | ast.SetOperation) -> Result:
        """The rows of ``query`` (which reads no outer column)."""
        ...

    def outer_refs(self, query: ast.Select | ast.SetOperation) -> tuple[ast.Column, ...]:
        """The columns ``query`` reads that its own FROM (or a subquery's in it) lacks."""
        ...


def has_subquery(e: Any) -> bool:
    """Whether an expression (or a tuple of them) holds a subquery anywhere."""
    if isinstance(e, _LEAVES) or e is None:
        return False
    if isinstance(e, ast.Subquery):
        return True
    return any(has_subquery(x) for x in subexpressions(e))


def fold(e: E, subs: Subqueries) -> E:
    """``e`` with each subquery that reads no outer column replaced by what it gives (see the
    module), and each correlated one marked with the outer columns it reads."""
    if not has_subquery(e):
        return e
    return _fold(e, subs)  # type: ignore[no-any-return]


def _fold(e: Any, subs: Subqueries) -> Any:
    if isinstance(e, ast.Subquery):
        outer = subs.outer_refs(e.query)
        if outer:
            return dataclasses.replace(e, outer=outer, expr=_fold(e.expr, subs))
        return _value_of(e, subs)
    if isinstance(e, tuple):
        return tuple(_fold(x, subs) for x in e)
    if not dataclasses.is_dataclass(e) or isinstance(e, type) or not has_subquery(e):
        return e
    return dataclasses.replace(e, **{f.name: _fold(getattr(e, f.name), subs) for f in dataclasses.fields(e)})


def correlated_value(
    sub: ast.Subquery, scope: Scope | None, evaluator: Evaluator, subs: Subqueries, memo: dict[Any, Any]
) -> Any:
    """A correlated subquery's value for the outer row ``scope``: run with the outer columns it
    reads written in as that row's values (``memo``: results by those values, for the
    statement)."""
    values = tuple(evaluator.eval(c, scope) for c in sub.outer)
    try:
        key: Any = (id(sub.query), values)
        hash(key)
    except TypeError:  # an array value: not kept
        key = None
    replacement = memo.get(key) if key is not None else None
    if replacement is None:
        bound = written_in(sub.query, dict(zip(sub.outer, map(ast.Literal, values), strict=True)))
        replacement = _value_of(dataclasses.replace(sub, query=bound, outer=()), subs, fold_expr=False)
        if key is not None:
            memo[key] = replacement
    return evaluator.eval(replacement, scope)


def written_in(node: Any, values: dict[ast.Column, ast.Literal]) -> Any:
    """``node`` (a query, in depth: its subqueries too) with each column of ``values`` replaced
    by its literal."""
    if isinstance(node, ast.Column):
        return values.get(node, node)
    if isinstance(node, tuple):
        return tuple(written_in(x, values) for x in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type | ast.Ident | ast.Literal | ast.TypeName):
        return node
    changes = {f.name: written_in(getattr(node, f.name), values) for f in dataclasses.fields(node)}
    return dataclasses.replace(node, **changes)


def evaluator_hook(evaluator: Evaluator, subs: Subqueries) -> Callable[[ast.Subquery, Scope | None], Any]:
    """What an evaluator calls for a correlated subquery it meets (``Evaluator.correlated``)."""
    memo: dict[Any, Any] = {}
    return lambda sub, scope: correlated_value(sub, scope, evaluator, subs, memo)


def _value_of(sub: ast.Subquery, subs: Subqueries, *, fold_expr: bool = True) -> ast.Expr:
    res = subs.run(sub.query)
    if sub.kind == "exists":
        return ast.Literal(bool(res.rows))
    if sub.kind == "in" and isinstance(sub.expr, ast.TupleLit):  # (a, b) IN (SELECT x, y ..)
        width = len(sub.expr.items)
        if len(res.columns) != width:
            more = "many" if len(res.columns) > width else "few"
            raise ColumnCountMismatch(f"subquery has too {more} columns")
        expr = _fold(sub.expr, subs) if fold_expr else sub.expr
        rows = tuple(ast.TupleLit(tuple(ast.Literal(v) for v in r)) for r in res.rows)
        return ast.InList(expr, rows, sub.negated)
    if len(res.columns) != 1:
        raise ColumnCountMismatch(f"subquery must return only one column, not {len(res.columns)}")
    values = [r[0] for r in res.rows]
    if sub.kind == "array":  # ``x = ANY (SELECT ..)``: the values, as an array
        return ast.Literal(values)
    if sub.kind == "in":
        assert sub.expr is not None
        expr = _fold(sub.expr, subs) if fold_expr else sub.expr
        return ast.InList(expr, tuple(ast.Literal(v) for v in values), sub.negated)
    if len(values) > 1:
        raise CardinalityViolation("more than one row returned by a subquery used as an expression")
    return ast.Literal(values[0] if values else None)
