"""The values a row write computes beyond what the statement gives: a column's DEFAULT,
stored computed columns, the NOT NULL checks of the row about to be written (shared by INSERT,
UPDATE and ``ON CONFLICT DO UPDATE``), the row's key and a ``USING TTL``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.type_errors import sql_text
from changefeed.engine.types import is_ydb_type
from changefeed.exceptions import ChangefeedError, InvalidStatement, NotNullViolation
from changefeed.sql import ast, astjson
from changefeed.sql.evaluator import Evaluator, Params, Scope
from changefeed.sql.functions import EvalContext
from changefeed.sql.session import Session
from changefeed.sql.statements.common import coerce

__all__ = ["check_not_null", "default_value", "key_of", "missing_key", "ttl_seconds", "with_computed"]


def default_value(session: Session, col: ColumnSchema, ev: Params, ctx: EvalContext) -> Any:
    """``col``'s DEFAULT for a row being written (None without one)."""
    if col.default is None:
        return None
    return coerce(col, session.const(astjson.from_json(col.default), ev, ctx))


def default_expr(col: ColumnSchema) -> ast.Expr:
    """The expression ``SET col = DEFAULT`` writes: the column's DEFAULT, else NULL."""
    return astjson.from_json(col.default) if col.default is not None else ast.Literal(None)


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


def missing_key(session: Session, schema: TableSchema, column: str) -> ChangefeedError:
    """A primary key column without a value: CockroachDB's not-null violation (23502) for a
    CockroachDB table; for a YDB or CQL table, an invalid request naming the column."""
    if session.dialect == "sql" and not any(is_ydb_type(c.type) for c in schema.columns):
        return NotNullViolation(f'null value in column "{column}" violates not-null constraint')
    return InvalidStatement(f"missing value for primary key column {column}")


def key_of(
    session: Session, schema: TableSchema, values: Mapping[int, Any], *, partial: bool = False
) -> tuple[Any, ...]:
    """The primary key of the row ``values`` (column id -> value); a missing part is an error, or
    with ``partial`` ends the key at the first missing clustering column."""
    key = []
    for c in schema.key:
        if c.id not in values or values[c.id] is None:
            if partial and c.role is Role.CLUSTERING:
                break
            raise missing_key(session, schema, c.name)
        key.append(values[c.id])
    return tuple(key)


def ttl_seconds(session: Session, expr: ast.Expr | None, evaluator: Evaluator) -> int | None:
    """A ``USING TTL`` in seconds (0: none), checked as ScyllaDB checks it."""
    if expr is None:
        return None
    v = evaluator.eval(expr, None)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 630_720_000:
        raise InvalidStatement(f"TTL must be a number of seconds between 0 and 630720000, not {sql_text(v)}")
    return v or None
