"""``INSERT .. ON CONFLICT (key) DO UPDATE SET c = e, .. [WHERE cond]``, as PostgreSQL and
CockroachDB run it: a row whose key is not there is inserted; a row whose key is there updates
the existing row instead, the assignments and the WHERE reading the existing row's columns by
name (or ``t.c``) and the row the INSERT proposed as ``excluded.c``; where the WHERE is not true
nothing is written and the row does not count. The conflict target must be the primary key (the
only unique constraint a table has here); a key written twice by one statement is PostgreSQL's
``21000`` (a command cannot affect a row a second time)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.exceptions import (
    CardinalityViolation,
    ColumnCountMismatch,
    InvalidColumnReference,
    InvalidStatement,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import AMBIGUOUS, Evaluator, Params, RowMap, Scope
from changefeed.sql.functions import EvalContext
from changefeed.sql.session import Session
from changefeed.sql.statements.common import coerce
from changefeed.sql.statements.row_values import check_not_null, default_expr, with_computed

__all__ = ["ConflictUpdate"]


class ConflictUpdate:
    """One INSERT statement's ``ON CONFLICT DO UPDATE``, checked against ``schema`` once."""

    def __init__(self, session: Session, schema: TableSchema, spec: ast.OnConflictUpdate) -> None:
        if not spec.target:
            raise ColumnCountMismatch(
                "ON CONFLICT DO UPDATE requires inference specification or constraint name"
            )
        if {session.column(schema, i).id for i in spec.target} != {c.id for c in schema.key}:
            raise InvalidColumnReference(
                "there is no unique or exclusion constraint matching the ON CONFLICT specification"
            )
        self.session = session
        self.schema = schema
        self.spec = spec
        self.assigns: list[tuple[ColumnSchema, ast.Expr]] = []
        for ident, e in spec.assignments:
            c = session.column(schema, ident)
            if c.is_key:
                raise InvalidStatement(f"cannot update primary key column {c.name}")
            if c.computed is not None:
                raise InvalidStatement(f"cannot write to computed column {c.name}")
            if any(c is d for d, _ in self.assigns):
                raise InvalidStatement(f'multiple assignments to the same column "{c.name}"')
            self.assigns.append((c, default_expr(c) if type(e) is ast.DefaultValue else e))
        self._done: set[tuple[Any, ...]] = set()

    def inserted(self, key: tuple[Any, ...]) -> None:
        """The statement inserted ``key``: a later row of it on that key would affect the row a
        second time (21000, as in PostgreSQL and CockroachDB), not update it."""
        self._done.add(key)

    def update(
        self,
        key: tuple[Any, ...],
        old: Mapping[int, Any],
        proposed: Mapping[int, Any],
        table_name: str,
        ev: Params,
        ctx: EvalContext,
    ) -> dict[int, Any] | None:
        """The cells to write over the existing row ``old`` of ``key`` (stored values), given the
        row the INSERT proposed; None where the WHERE is not true."""
        if key in self._done:
            raise CardinalityViolation("ON CONFLICT DO UPDATE command cannot affect row a second time")
        session, schema = self.session, self.schema
        existing = session.py_row(schema, old)
        excluded = session.py_row(schema, proposed)
        # ``t.c`` and ``excluded.c``; a bare ``c`` names both, so it is ambiguous (42702), as in
        # PostgreSQL
        names = list(existing)
        index: dict[str, int] = {}
        for i, n in enumerate(names):
            index[f"{table_name}.{n}"] = i
            index[f"excluded.{n}"] = len(names) + i
            index[n] = AMBIGUOUS
        lower = {k.lower(): i for k, i in index.items()}
        row = (*existing.values(), *(excluded.get(n) for n in names))
        scope = Scope(RowMap(row, index, lower))
        evaluator = Evaluator(session, ev, ctx)
        if self.spec.where is not None and evaluator.eval(self.spec.where, scope) is not True:
            return None  # not affected: a later row of the statement may still update it
        self._done.add(key)
        cells = {c.id: coerce(c, evaluator.eval(e, scope)) for c, e in self.assigns}
        cells = with_computed(session, schema, key, cells, old, ev, ctx)
        check_not_null(session, schema, {**old, **cells})
        return cells
