"""The values a SQL row write computes beyond what the statement gives: a column's DEFAULT,
stored computed columns, and the NOT NULL checks of the row about to be written (shared by
INSERT, UPDATE and ``ON CONFLICT DO UPDATE``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.exceptions import NotNullViolation
from changefeed.sql import astjson
from changefeed.sql.evaluator import Evaluator, Params, Scope
from changefeed.sql.functions import EvalContext
from changefeed.sql.session import Session
from changefeed.sql.statements.common import coerce

__all__ = ["check_not_null", "default_value", "with_computed"]


def default_value(session: Session, col: ColumnSchema, ev: Params, ctx: EvalContext) -> Any:
    """``col``'s DEFAULT for a row being written (None without one)."""
    if col.default is None:
        return None
    return coerce(col, session.const(astjson.from_json(col.default), ev, ctx))


def with_computed(
    session: Session,
    schema: TableSchema,
    key: tuple[Any, ...],
    cells: dict[int, Any],
    old: Mapping[int, Any] | None,
    ev: Params,
    ctx: EvalContext,
) -> dict[int, Any]:
    """``cells`` with the table's stored computed columns worked out from the row they make
    (``old`` under them, ``key`` and ``cells`` over it)."""
    computed = [c for c in schema.columns if c.computed is not None and not c.virtual]
    if not computed:
        return cells
    row = {**(old or {}), **dict(zip((c.id for c in schema.key), key, strict=True)), **cells}
    scope = {c.name: c.type.from_db(row.get(c.id)) for c in schema.columns if not c.virtual}
    evaluator = Evaluator(session, ev, ctx)
    out = dict(cells)
    for c in computed:
        out[c.id] = coerce(c, evaluator.eval(astjson.from_json(c.computed), Scope(scope)))
    return out


def check_not_null(session: Session, schema: TableSchema, cells: Mapping[int, Any]) -> None:
    """NOT NULL: no NULL written to such a column, and none left out of a new row (``cells``)."""
    for c in schema.columns:
        if c.not_null and not c.is_key and c.id in cells and cells[c.id] is None:
            raise NotNullViolation(f'null value in column "{c.name}" violates not-null constraint')
    for c in schema.columns:
        if c.not_null and not c.is_key and not c.virtual and c.id not in cells:
            raise NotNullViolation(f'null value in column "{c.name}" violates not-null constraint')
