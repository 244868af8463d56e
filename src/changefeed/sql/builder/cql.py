"""Rules of CQL's own statements: its SELECT (``JSON``, ``GROUP BY``, ``PER PARTITION LIMIT``),
``INSERT .. JSON`` and ``TRUNCATE``."""

from __future__ import annotations

from typing import Any

from lark import v_args

from changefeed.sql import ast
from changefeed.sql.ast_cql import calls_cell_function
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position
from changefeed.sql.builder.dml import select_node

__all__ = ["CqlRules"]


class CqlRules(Rules):
    """CQL's statements that the SQL dialect has not."""

    @v_args(meta=True)
    def cql_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        """A plain :class:`ast.Select`, or a :class:`ast.CqlSelect` around it when it has
        ``JSON``, ``GROUP BY``, ``PER PARTITION LIMIT`` or selects ``ttl(..)``/``writetime(..)``."""
        node = select_node(meta, [*c, Clause("table", first(c, ast.QName))])
        cl = clauses(c)
        cells = any(calls_cell_function(it.expr) for it in node.items)
        if not (cl.get("json") or node.group_by or "per_partition_limit" in cl or cells):
            return node
        return ast.CqlSelect(
            node,
            json=bool(cl.get("json")),
            per_partition_limit=cl.get("per_partition_limit"),
            pos=position(meta),
        )

    def select_json(self, c: list[Any]) -> Clause:
        return Clause("json", True)

    def per_partition_limit(self, c: list[ast.Expr]) -> Clause:
        return Clause("per_partition_limit", c[0])

    @v_args(meta=True)
    def cql_insert_json(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        using = cl.get("using", {})
        return ast.InsertJson(
            table=c[0],
            json=c[1],
            default_unset=cl.get("json_default") == "unset",
            if_not_exists=cl.get("if_not_exists", False),
            ttl=using.get("ttl"),
            timestamp=using.get("timestamp"),
            pos=position(meta),
        )

    def json_default_null(self, c: list[Any]) -> Clause:
        return Clause("json_default", "null")

    def json_default_unset(self, c: list[Any]) -> Clause:
        return Clause("json_default", "unset")

    @v_args(meta=True)
    def truncate(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Truncate((first(c, ast.QName),), pos=position(meta))
