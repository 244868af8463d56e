"""Rules for session statements: transactions (``BEGIN``, ``COMMIT``, ``ROLLBACK``) and the
``SHOW``/``DESCRIBE`` introspection statements."""

from __future__ import annotations

from typing import Any

from lark import v_args

from changefeed.sql import ast
from changefeed.sql.builder.common import Rules, first, position

__all__ = ["SessionRules"]


class SessionRules(Rules):
    """Transactions and introspection."""

    @v_args(meta=True)
    def begin(self, meta: Any, c: list[Any]) -> ast.Statement:
        modes = next((x for x in c if isinstance(x, list)), [])
        access = "read only" in modes or ("read write" not in modes and None)
        return ast.Begin(pos=position(meta), read_only=access)

    def txn_modes(self, c: list[Any]) -> list[str]:
        return [x for x in c if isinstance(x, str)]

    def txn_read_only(self, c: list[Any]) -> str:
        return "read only"

    def txn_read_write(self, c: list[Any]) -> str:
        return "read write"

    @v_args(meta=True)
    def commit(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Commit(pos=position(meta))

    @v_args(meta=True)
    def rollback(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Rollback(pos=position(meta))

    @v_args(meta=True)
    def savepoint(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Savepoint(first(c, ast.Ident), pos=position(meta))

    @v_args(meta=True)
    def release_savepoint(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ReleaseSavepoint(first(c, ast.Ident), pos=position(meta))

    @v_args(meta=True)
    def rollback_to(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.RollbackToSavepoint(first(c, ast.Ident), pos=position(meta))

    def txn_word(self, c: list[Any]) -> None:
        return None

    def _show(self, meta: Any, what: str, c: list[Any]) -> ast.Show:
        return ast.Show(what, first(c, ast.QName), pos=position(meta))

    @v_args(meta=True)
    def show_tables(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "tables", c)

    @v_args(meta=True)
    def show_changefeed_jobs(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "changefeed jobs", c)

    @v_args(meta=True)
    def show_jobs(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "jobs", c)

    @v_args(meta=True)
    def show_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "create table", c)

    @v_args(meta=True)
    def show_columns(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "columns", c)

    @v_args(meta=True)
    def show_databases(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "databases", c)

    describe_table = show_create_table
    describe_tables = show_tables

    @v_args(meta=True)
    def describe_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Show("create keyspace", ast.QName((c[0],)), pos=position(meta))

    @v_args(meta=True)
    def describe_keyspaces(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "keyspaces", c)
