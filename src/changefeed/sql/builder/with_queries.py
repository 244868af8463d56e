"""``WITH [RECURSIVE] name [(columns)] AS (SELECT ..) [, ..] SELECT ..`` (common table
expressions), read as PostgreSQL and CockroachDB read them: each name, in the statement after it
and in the WITH queries that follow, stands for its query's rows.

Built by putting each query where its name is read, as a statement source (``FROM [SELECT ..]``,
the relation of the query's rows, with the name as its alias); a query read twice runs twice,
which for the read-only queries taken here gives the same rows (PostgreSQL also inlines a WITH
query read once). A column list, or a query of ``WITH RECURSIVE`` that reads its own name, is
read as an :class:`~changefeed.sql.ast.CommonTableQuery` (``sql/statements/common_tables.py``
renames the columns and runs the recursion). A recursive query must be ``non-recursive term
UNION [ALL] recursive term``, the recursive term reading its own name once, in its FROM (42P19,
as PostgreSQL). A WITH query may be joined, as a table is."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from changefeed.exceptions import DuplicateAlias, InvalidRecursion, UnsupportedFeature
from changefeed.sql import ast

__all__ = ["WithQuery", "inline"]

Query = ast.Select | ast.SetOperation
#: What a read of a WITH name becomes: its query, its column-renaming or recursive form, or (in
#: its own recursive term) the working table.
Source = ast.Select | ast.SetOperation | ast.CommonTableQuery | ast.WorkingTable

_Named = dict[str, tuple[ast.Ident, Source]]


class WithQuery(NamedTuple):
    name: ast.Ident
    columns: tuple[ast.Ident, ...]
    query: Query


def inline(queries: Sequence[WithQuery], body: Query, *, recursive: bool = False) -> Query:
    """``body`` with every read of a WITH query's name replaced by that query."""
    named: _Named = {}
    for q in queries:
        key = _key(q.name)
        if key in named:
            raise DuplicateAlias(f'WITH query name "{q.name.name}" specified more than once')
        source: Source
        if recursive and _reads(q.query, key):
            source = _recursive(q, named)
        else:
            query = _substitute(q.query, named)
            source = ast.CommonTableQuery(q.name, q.columns, query) if q.columns else query
        named[key] = (q.name, source)
    out = _substitute(body, named)
    assert isinstance(out, ast.Select | ast.SetOperation)
    return out


def _recursive(q: WithQuery, named: _Named) -> ast.CommonTableQuery:
    """``anchor UNION [ALL] step`` of a query that reads its own name, as PostgreSQL requires it."""
    key = _key(q.name)
    shape = f'recursive query "{q.name.name}" does not have the form non-recursive-term UNION [ALL] recursive-term'
    query = q.query
    if not isinstance(query, ast.SetOperation) or query.op != "union" or _reads(query.left, key):
        raise InvalidRecursion(shape)
    if query.order_by or query.limit is not None or query.offset is not None:
        raise UnsupportedFeature("ORDER BY, LIMIT or OFFSET in a recursive query is not implemented")
    anchor = _substitute(query.left, named)
    step = _substitute(query.right, {**named, key: (q.name, ast.WorkingTable(q.name))})
    return ast.CommonTableQuery(q.name, q.columns, anchor, step, union_all=query.all)


def _key(name: ast.Ident) -> str:
    """Unquoted names match whatever their case, as PostgreSQL folds them; quoted ones exactly."""
    return name.name if name.quoted else name.name.lower()


def _reads(node: Any, key: str) -> bool:
    """Whether ``node`` (a query) reads the WITH name ``key`` anywhere (its subqueries too)."""
    if isinstance(node, ast.Select):
        for q in (node.table, *(j.table for j in node.joins)):
            if q is not None and len(q.parts) == 1 and _key(q.parts[0]) == key:
                return True
    if isinstance(node, tuple):
        return any(_reads(x, key) for x in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type | ast.Ident | ast.QName):
        return False
    return any(_reads(getattr(node, f.name), key) for f in dataclasses.fields(node))


def _named(q: ast.QName | None, named: _Named) -> tuple[ast.Ident, Source] | None:
    if q is None or len(q.parts) != 1:
        return None
    return named.get(_key(q.parts[0]))


def _substitute(node: Any, named: _Named) -> Any:
    if isinstance(node, tuple):
        items = tuple(_substitute(x, named) for x in node)
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not dataclasses.is_dataclass(node) or isinstance(node, type | ast.Ident | ast.QName):
        return node
    changes = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        new = _substitute(value, named)
        if new is not value:
            changes[f.name] = new
    if changes:
        node = dataclasses.replace(node, **changes)
    if isinstance(node, ast.Join) and node.source is None:
        hit = _named(node.table, named)
        if hit is not None:
            node = dataclasses.replace(node, source=hit[1], alias=node.alias or hit[0])
    if isinstance(node, ast.Select):
        hit = _named(node.table, named)
        if hit is not None:
            if node.as_of is not None:
                raise UnsupportedFeature("AS OF SYSTEM TIME cannot read a WITH query")
            node = dataclasses.replace(node, table=None, source=hit[1], alias=node.alias or hit[0])
    return node
