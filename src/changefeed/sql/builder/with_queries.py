"""``WITH name AS (SELECT ..) [, ..] SELECT ..`` (non-recursive common table expressions), read as
PostgreSQL and CockroachDB read them: each name, in the statement after it and in the WITH
queries that follow, stands for its query's rows. Built by putting each query where its name is
read, as a statement source (``FROM [SELECT ..]``, the relation of the query's rows, with the
name as its alias); a query read twice runs twice, which for the read-only queries taken here
gives the same rows (PostgreSQL also inlines a WITH query read once). Not taken: ``RECURSIVE``,
column lists after the name, a WITH query joined to another table (a JOIN reads tables only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from changefeed.exceptions import DuplicateAlias, UnsupportedFeature
from changefeed.sql import ast

__all__ = ["inline"]

_Named = dict[str, tuple[ast.Ident, "ast.Select | ast.SetOperation"]]


Query = ast.Select | ast.SetOperation


def inline(queries: Sequence[tuple[ast.Ident, Query]], body: Query) -> Query:
    """``body`` with every read of a WITH query's name replaced by that query."""
    named: _Named = {}
    for name, query in queries:
        key = _key(name)
        if key in named:
            raise DuplicateAlias(f'WITH query name "{name.name}" specified more than once')
        named[key] = (name, _substitute(query, named))
    out = _substitute(body, named)
    assert isinstance(out, ast.Select | ast.SetOperation)
    return out


def _key(name: ast.Ident) -> str:
    """Unquoted names match whatever their case, as PostgreSQL folds them; quoted ones exactly."""
    return name.name if name.quoted else name.name.lower()


def _named(q: ast.QName | None, named: _Named) -> tuple[ast.Ident, ast.Select | ast.SetOperation] | None:
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
    if isinstance(node, ast.Select):
        for j in node.joins:
            if _named(j.table, named) is not None:
                raise UnsupportedFeature(
                    f'a WITH query ("{j.table.last.name}") cannot be joined: only tables can'
                )
        hit = _named(node.table, named)
        if hit is not None:
            if node.joins:
                raise UnsupportedFeature(f'a WITH query ("{hit[0].name}") cannot be joined: only tables can')
            if node.as_of is not None:
                raise UnsupportedFeature("AS OF SYSTEM TIME cannot read a WITH query")
            node = dataclasses.replace(node, table=None, source=hit[1], alias=node.alias or hit[0])
    return node
