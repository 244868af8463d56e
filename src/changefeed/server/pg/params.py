"""Types of a statement's ``$n`` parameters, for ParameterDescription (asyncpg and JDBC encode
their arguments by what the server says here).

A parameter takes the type it is cast to (``$1::INT``), or the type of the column it is compared
with (``col = $1``, ``col IN ($1, $2)``, ``col BETWEEN $1 AND $2``), added to or multiplied by
(``n + $1``, a number column), assigned to (``SET col = $1``) or inserted into (``VALUES ($1,
..)``); LIMIT takes ``int8``; anything else is ``text``, which the engine converts as
PostgreSQL's ``unknown`` would.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind
from changefeed.exceptions import ChangefeedError
from changefeed.server.pg import types as t
from changefeed.sql import ast

_COMPARE = frozenset({"=", "==", "<>", "!=", "<", "<=", ">", ">=", "LIKE", "like"})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
_NUMBERS = frozenset({Kind.INT, Kind.FLOAT, Kind.DECIMAL})


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, tuple | list):
        for x in node:
            yield from _children(x)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        yield node


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            for child in _children(getattr(node, f.name)):
                yield from _walk(child)


def param_types(stmt: ast.Statement, tables: list[TableSchema], count: int) -> list[int]:
    """OIDs for parameters ``$1..$count`` of ``stmt``."""
    out = [t.TEXT] * count
    source = getattr(stmt, "source", None)
    if isinstance(source, ast.Select):  # FROM (SELECT ..), a WITH query: its parameters' types
        out = param_types(source, tables, count)
    table_name = getattr(stmt, "table", None)
    schema = _schema(table_name, tables)
    cols = {c.name: c for c in schema.columns} if schema is not None else {}
    for j in getattr(stmt, "joins", ()):  # a joined table's columns, where the first has none of that name
        joined = _schema(j.table, tables)
        for c in joined.columns if joined is not None else ():
            cols.setdefault(c.name, c)

    def set_param(p: Any, col_name: str | None) -> None:
        if isinstance(p, ast.Param) and 0 <= p.index < count and col_name in cols:
            out[p.index] = t.oid_of(cols[col_name].type)

    if isinstance(stmt, ast.Insert) and schema is not None:
        names = [c.name for c in stmt.columns] or [c.name for c in schema.columns if c.computed is None]
        for row in stmt.rows:
            for name, value in zip(names, row, strict=False):
                set_param(value, name)
    if isinstance(stmt, ast.Update):
        for ident, value in stmt.assignments:
            set_param(value, ident.name)
    for node in _walk(stmt):
        if isinstance(node, ast.Cast) and isinstance(node.expr, ast.Param) and 0 <= node.expr.index < count:
            try:  # ``$1::INT``: the type it is cast to, as PostgreSQL infers it
                cast = resolve_type(node.type.name, node.type.params, node.type.array, dialect="sql")
            except ChangefeedError:
                continue
            out[node.expr.index] = t.oid_of(cast)
        elif isinstance(node, ast.BinaryOp) and str(node.op) in _ARITHMETIC:
            # ``n + $1``: the number column's type
            for col, other in ((node.left, node.right), (node.right, node.left)):
                named = cols.get(col.name.name) if isinstance(col, ast.Column) else None
                if named is not None and named.type.kind in _NUMBERS:
                    set_param(other, named.name)
        elif isinstance(node, ast.IsDistinct) or (
            isinstance(node, ast.BinaryOp) and str(node.op) in _COMPARE
        ):
            if isinstance(node.left, ast.Column):
                set_param(node.right, node.left.name.name)
            if isinstance(node.right, ast.Column):
                set_param(node.left, node.right.name.name)
        elif isinstance(node, ast.InList) and isinstance(node.expr, ast.Column):
            for item in node.items:
                set_param(item, node.expr.name.name)
        elif isinstance(node, ast.Like) and isinstance(node.expr, ast.Column):
            set_param(node.pattern, node.expr.name.name)
        elif isinstance(node, ast.Between) and isinstance(node.expr, ast.Column):
            set_param(node.low, node.expr.name.name)
            set_param(node.high, node.expr.name.name)
    limit = getattr(stmt, "limit", None)
    if isinstance(limit, ast.Param) and 0 <= limit.index < count:
        out[limit.index] = t.INT8
    return out


def _schema(name: Any, tables: list[TableSchema]) -> TableSchema | None:
    if not isinstance(name, ast.QName):
        return None
    wanted = ".".join(p.name for p in name.parts)
    return next((s for s in tables if s.name == wanted or s.name.split(".")[-1] == wanted), None)


#: The opening delimiter of a dollar-quoted string (``$$``, ``$tag$``).
_DOLLAR_OPEN = re.compile(r"\$(?:[^\W\d]\w*)?\$")


def param_count(sql: str) -> int:
    """Highest ``$n`` in the statement text (outside quotes and dollar-quoted strings)."""
    best = 0
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            j = sql.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == "$" and (m := _DOLLAR_OPEN.match(sql, i)) is not None:
            j = sql.find(m.group(), m.end())
            i = n if j < 0 else j + len(m.group())
            continue
        if c == "$" and i + 1 < n and sql[i + 1].isdigit():
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            best = max(best, int(sql[i + 1 : j]))
            i = j
            continue
        i += 1
    return best
