"""``GROUP BY ROLLUP (..)``, ``CUBE (..)`` and ``GROUPING SETS (..)``, as PostgreSQL runs them.

The builder crosses a GROUP BY's elements into the sets of expressions to group by in turn
(``ROLLUP (a, b)`` is ``(a, b)``, ``(a)``, ``()``; ``CUBE`` every subset). The query is run once
for each set, as a SELECT grouped by that set alone in which each grouped expression outside it
reads NULL and ``GROUPING(x, ..)`` is the set's bit mask (a 1 for each argument the set leaves
out, the last argument the lowest bit); the runs are joined as ``UNION ALL`` in the order of the
sets, and the query's ORDER BY, LIMIT and OFFSET apply to the whole. Each result column keeps the
name the query gives it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from changefeed.exceptions import UnsupportedFeature
from changefeed.sql import ast
from changefeed.sql.functions import AGGREGATES
from changefeed.sql.session import Session
from changefeed.sql.statements.select_clauses import label

__all__ = ["run"]


def run(session: Session, s: ast.Select) -> ast.Select | ast.SetOperation:
    """The statement that answers ``s`` (which has grouping sets): its runs joined."""
    if s.distinct or s.distinct_on:
        raise UnsupportedFeature("DISTINCT with GROUP BY ROLLUP, CUBE or GROUPING SETS is not supported")
    every = s.group_by
    items = tuple(
        it
        if isinstance(it.expr, ast.Star | ast.QualifiedStar) or it.alias is not None
        else dataclasses.replace(it, alias=ast.Ident(label(session, it), quoted=True))
        for it in s.items
    )
    runs = [
        dataclasses.replace(
            s,
            items=tuple(dataclasses.replace(it, expr=_for_set(it.expr, grouped, every)) for it in items),
            group_by=grouped,
            grouping_sets=(),
            having=_for_set(s.having, grouped, every),
            order_by=(),
            limit=None,
            offset=None,
        )
        for grouped in s.grouping_sets
    ]
    order_by = tuple(_by_position(o, s.items) for o in s.order_by)
    if len(runs) == 1:
        return dataclasses.replace(runs[0], order_by=order_by, limit=s.limit, offset=s.offset)
    joined: ast.Select | ast.SetOperation = runs[0]
    for later in runs[1:]:
        joined = ast.SetOperation(joined, "union", True, later)
    assert isinstance(joined, ast.SetOperation)
    return dataclasses.replace(joined, order_by=order_by, limit=s.limit, offset=s.offset, pos=s.pos)


def _for_set(e: Any, grouped: tuple[ast.Expr, ...], every: tuple[ast.Expr, ...]) -> Any:
    """``e`` for the run grouped by ``grouped``: the grouped expressions it leaves out NULL (not
    inside an aggregate's arguments), ``GROUPING(..)`` its mask."""
    if e is None or isinstance(e, ast.Literal | ast.Ident | ast.Subquery):
        return e
    if e in every and e not in grouped:
        return ast.Literal(None)
    if isinstance(e, ast.FuncCall):
        name = e.name.lower()
        if name == "grouping":
            mask = 0
            for arg in e.args:
                mask = mask * 2 + (0 if arg in grouped else 1)
            return ast.Literal(mask)
        if name in AGGREGATES:
            return e
    if isinstance(e, tuple):
        return tuple(_for_set(x, grouped, every) for x in e)
    if not dataclasses.is_dataclass(e) or isinstance(e, type):
        return e
    return dataclasses.replace(
        e, **{f.name: _for_set(getattr(e, f.name), grouped, every) for f in dataclasses.fields(e)}
    )


def _by_position(o: ast.OrderItem, items: tuple[ast.SelectItem, ...]) -> ast.OrderItem:
    """An ORDER BY item of the whole result: an expression the select list has is that column's
    position (the union orders by positions and result names)."""
    for i, it in enumerate(items, start=1):
        if it.expr == o.expr and not isinstance(o.expr, ast.Literal):
            return dataclasses.replace(o, expr=ast.Literal(i))
    return o
