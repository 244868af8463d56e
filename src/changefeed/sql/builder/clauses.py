"""Rules for names and the clauses statements share: ``IF [NOT] EXISTS``, ``WHERE``, ``ORDER BY``,
``LIMIT``, select lists, ``SET`` assignments, ``WITH`` options, ``RETURNING``."""

from __future__ import annotations

import itertools
from typing import Any

from lark import Token

from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules, option_value, unbackslash

__all__ = ["ClauseRules"]


class GroupingSets:
    """ROLLUP, CUBE, GROUPING SETS or ``()`` in a GROUP BY, before the sets are crossed."""

    __slots__ = ("sets",)

    def __init__(self, sets: tuple[tuple[ast.Expr, ...], ...]) -> None:
        self.sets = sets


def _units(items: tuple[ast.Expr, ...]) -> list[tuple[ast.Expr, ...]]:
    """ROLLUP's and CUBE's elements: ``(a, b)`` is one element of two expressions."""
    return [x.items if isinstance(x, ast.TupleLit) else (x,) for x in items]


def _flat(units: Any) -> tuple[ast.Expr, ...]:
    return tuple(e for unit in units for e in unit)


class ClauseRules(Rules):
    """Names, and the clauses several statements share."""

    # -- names ------------------------------------------------------------------------------------

    def ident(self, c: list[Token]) -> ast.Ident:
        tok = c[0]
        if tok.type == "IDENT":
            return ast.Ident(str(tok))
        body = tok[1:-1]
        if tok.type == "BQIDENT":
            return ast.Ident(body.replace("``", "`"), quoted=True)
        body = body.replace('""', '"')
        if self.dialect == "sql" and "\\" in body:
            body = unbackslash(body)
        return ast.Ident(body, quoted=True)

    def qname(self, c: list[ast.Ident]) -> ast.QName:
        return ast.QName(tuple(c))

    def ident_list(self, c: list[ast.Ident]) -> tuple[ast.Ident, ...]:
        return tuple(c)

    def column_list(self, c: list[ast.Ident]) -> Clause:
        return Clause("columns", tuple(c))

    def family_item(self, c: list[ast.Ident]) -> ast.Ident:
        """Apache Phoenix ``B.vb`` in a column list: the column (names are unique across
        families here), checked against its family by the Phoenix statements."""
        if self.dialect != "sql":
            raise ValueError(f"unexpected '.' in column name {c[0].name}.{c[1].name}")
        return c[1]

    # -- clauses ----------------------------------------------------------------------------------

    def if_not_exists(self, c: list[Any]) -> Clause:
        return Clause("if_not_exists", True)

    def if_exists(self, c: list[Any]) -> Clause:
        return Clause("if_exists", True)

    def distinct(self, c: list[Any]) -> Clause:
        return Clause("distinct", True)

    def distinct_on(self, c: list[tuple[ast.Expr, ...]]) -> Clause:
        return Clause("distinct_on", tuple(c[0]))

    def allow_filtering(self, c: list[Any]) -> Clause:
        return Clause("allow_filtering", True)

    def bypass_cache(self, c: list[Any]) -> Clause:
        return Clause("bypass_cache", True)

    def where_clause(self, c: list[ast.Expr]) -> Clause:
        return Clause("where", c[0])

    def order_by(self, c: list[ast.OrderItem]) -> Clause:
        return Clause("order_by", tuple(c))

    def group_by(self, c: list[tuple[ast.Expr, ...]]) -> Clause:
        return Clause("group_by", tuple(c[0]))

    def sql_group_by(self, c: list[Any]) -> list[Clause]:
        """``GROUP BY a, ROLLUP (b, c)``: plain expressions, or with ROLLUP, CUBE or GROUPING
        SETS the sets grouped by in turn (each element's sets crossed with the others')."""
        if all(not isinstance(x, GroupingSets) for x in c):
            return [Clause("group_by", tuple(c))]
        sets: list[tuple[ast.Expr, ...]] = [()]
        for x in c:
            options = x.sets if isinstance(x, GroupingSets) else ((x,),)
            sets = [tuple(dict.fromkeys((*a, *b))) for a in sets for b in options]
        every = tuple(dict.fromkeys(e for s in sets for e in s))
        return [Clause("group_by", every), Clause("grouping_sets", tuple(sets))]

    def rollup_item(self, c: list[tuple[ast.Expr, ...]]) -> GroupingSets:
        units = _units(c[0])
        return GroupingSets(tuple(_flat(units[:n]) for n in range(len(units), -1, -1)))

    def cube_item(self, c: list[tuple[ast.Expr, ...]]) -> GroupingSets:
        units = _units(c[0])
        return GroupingSets(
            tuple(
                _flat(combo) for n in range(len(units), -1, -1) for combo in itertools.combinations(units, n)
            )
        )

    def grouping_sets_item(self, c: list[Any]) -> GroupingSets:
        sets: list[tuple[ast.Expr, ...]] = []
        for x in c:
            if isinstance(x, GroupingSets):
                sets.extend(x.sets)
            elif isinstance(x, ast.TupleLit):
                sets.append(x.items)
            else:
                sets.append((x,))
        return GroupingSets(tuple(sets))

    def empty_grouping(self, c: list[Any]) -> GroupingSets:
        return GroupingSets(((),))

    def order_item(self, c: list[Any]) -> ast.OrderItem:
        nulls = c[2] if len(c) > 2 else None
        return ast.OrderItem(c[0], descending=c[1] == "DESC", nulls_first=nulls)

    def nulls_first(self, c: list[Any]) -> bool:
        return True

    def nulls_last(self, c: list[Any]) -> bool:
        return False

    def having(self, c: list[ast.Expr]) -> Clause:
        return Clause("having", c[0])

    def offset_clause(self, c: list[Any]) -> Clause:
        return Clause("offset", c[0])

    def order_dir(self, c: list[Token]) -> str:
        return str(c[0]).upper()

    def limit_clause(self, c: list[ast.Expr]) -> Clause:
        return Clause("limit", c[0])

    def fetch_clause(self, c: list[Any]) -> Clause:
        count = next((x for x in c if x is not None and not isinstance(x, Token)), None)
        return Clause("limit", count if count is not None else ast.Literal(1))

    def limit_all(self, c: list[Any]) -> Clause:
        return Clause("limit", None)

    def limit_offset(self, c: list[Any]) -> list[Clause]:
        return [x for x in c if isinstance(x, Clause)]

    def select_list(self, c: list[ast.SelectItem]) -> tuple[ast.SelectItem, ...]:
        return tuple(c)

    def star_item(self, c: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(ast.Star())

    def qualified_star_item(self, c: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(ast.QualifiedStar(c[0]))

    def select_item(self, c: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(c[0], c[1])

    def alias(self, c: list[ast.Ident]) -> ast.Ident:
        return c[-1]

    def assignments(self, c: list[tuple[ast.Ident, ast.Expr]]) -> Clause:
        return Clause("assignments", tuple(c))

    def assignment(self, c: list[Any]) -> tuple[ast.Ident, ast.Expr]:
        return (c[0], c[1])

    def default_assignment(self, c: list[Any]) -> tuple[ast.Ident, ast.Expr]:
        return (c[0], ast.DefaultValue())

    def option_kv(self, c: list[Any]) -> ast.Option:
        return (c[0].name.lower(), option_value(c[1]))

    def returning(self, c: list[tuple[ast.SelectItem, ...]]) -> Clause:
        return Clause("returning", c[0])
