"""Rules for YDB's asynchronous replication (issue 20): ``CREATE``/``ALTER``/``DROP ASYNC
REPLICATION`` and the secrets its options name (``CREATE``/``DROP SECRET``)."""

from __future__ import annotations

from typing import Any

from lark import v_args

from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position

__all__ = ["ReplicationRules"]


class ReplicationRules(Rules):
    """YDB's asynchronous replication and its secrets."""

    def repl_item(self, c: list[ast.QName]) -> ast.ReplicationItem:
        return ast.ReplicationItem(c[0], c[1])

    def repl_cascade(self, c: list[Any]) -> Clause:
        return Clause("cascade", True)

    def or_replace(self, c: list[Any]) -> Clause:
        return Clause("or_replace", True)

    @v_args(meta=True)
    def create_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        items = tuple(x for x in c if isinstance(x, ast.ReplicationItem))
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.CreateAsyncReplication(first(c, ast.QName), items, options, pos=position(meta))

    @v_args(meta=True)
    def alter_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.AlterAsyncReplication(first(c, ast.QName), options, pos=position(meta))

    @v_args(meta=True)
    def drop_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropAsyncReplication(
            first(c, ast.QName), clauses(c).get("cascade", False), pos=position(meta)
        )

    @v_args(meta=True)
    def create_secret(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.CreateSecret(
            first(c, ast.QName),
            options,
            or_replace=cl.get("or_replace", False),
            if_not_exists=cl.get("if_not_exists", False),
            pos=position(meta),
        )

    @v_args(meta=True)
    def drop_secret(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropSecret(first(c, ast.QName), clauses(c).get("if_exists", False), pos=position(meta))
