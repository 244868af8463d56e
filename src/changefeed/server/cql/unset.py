"""Unset bound values (protocol v4: a ``[value]`` of length -2, the drivers' ``UNSET_VALUE``, and
every named marker a client leaves out): as in ScyllaDB, an unset value leaves its column alone.

``INSERT INTO t (pk, a, b) VALUES (?, ?, ?)`` with ``a`` unset writes ``pk`` and ``b`` only; an
``UPDATE``'s ``SET a = ?`` (or ``a = a + ?``) with ``a`` unset is left out; an unset ``USING
TTL ?`` or ``USING TIMESTAMP ?`` is as if there were none. An unset value anywhere else (a key
in ``WHERE``, an ``IF`` condition, a ``SELECT`` or ``DELETE``) is ScyllaDB's
``Invalid unset value for column pk``. Without this an unset value was written as null, wiping
the column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.evaluator import subexpressions

__all__ = ["without_unset"]


def without_unset(stmt: ast.Statement, unset: frozenset[int], names: Sequence[str]) -> ast.Statement | None:
    """``stmt`` without what refers to the markers ``unset`` (``names``: each marker's column),
    or None when nothing is left to write (an ``UPDATE`` whose every assignment was unset)."""
    if isinstance(stmt, ast.Insert) and len(stmt.rows) == 1:
        keep = [i for i, e in enumerate(stmt.rows[0]) if not _is_unset(e, unset)]
        stmt = dataclasses.replace(
            stmt,
            columns=tuple(stmt.columns[i] for i in keep) if stmt.columns else stmt.columns,
            rows=(tuple(stmt.rows[0][i] for i in keep),),
            ttl=None if _is_unset(stmt.ttl, unset) else stmt.ttl,
            timestamp=None if _is_unset(stmt.timestamp, unset) else stmt.timestamp,
        )
    elif isinstance(stmt, ast.Update):
        assignments = tuple((c, e) for c, e in stmt.assignments if not _refers(e, unset))
        if not assignments:
            return None
        stmt = dataclasses.replace(
            stmt,
            assignments=assignments,
            ttl=None if _is_unset(stmt.ttl, unset) else stmt.ttl,
            timestamp=None if _is_unset(stmt.timestamp, unset) else stmt.timestamp,
        )
    left = next((p.index for p in _params(stmt) if p.index in unset), None)
    if left is not None:
        raise InvalidStatement(f"Invalid unset value for column {names[left]}")
    return stmt


def _is_unset(e: object, unset: frozenset[int]) -> bool:
    return isinstance(e, ast.Param) and e.index in unset


def _refers(e: object, unset: frozenset[int]) -> bool:
    return any(p.index in unset for p in _params(e))


def _params(node: Any) -> Iterator[ast.Param]:
    """Every bind marker in ``node`` (a statement or an expression), at any depth."""
    if isinstance(node, ast.Param):
        yield node
        return
    for child in subexpressions(node):
        yield from _params(child)
