"""Helpers more than one statement family needs: storage coercion, key pushdown, the change stream."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.privileges import Privilege
from changefeed.engine.storage import TableStore
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import SqlType
from changefeed.exceptions import TypeMismatch, UndefinedTable, UniqueViolation
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, conjuncts, is_const
from changefeed.sql.session import Session

#: ScyllaDB's CDC log of table ``t`` is the table ``t_scylla_cdc_log``.
LOG_SUFFIX = "_scylla_cdc_log"


def bool_type() -> SqlType:
    return resolve_type("boolean", dialect="cql")


def coerce(col: ColumnSchema, value: Any) -> Any:
    """Python value -> storage value for ``col``, with the column named in errors."""
    v = col.type.coerce(value, f"column {col.name}")
    return col.type.to_db(v)


def unique_violation(schema: TableSchema, key: Sequence[Any]) -> UniqueViolation:
    """The 23505 of an INSERT of primary key ``key`` (its stored values), which ``schema``'s
    table holds already."""
    columns = ", ".join(c.name for c in schema.key)
    values = ", ".join(str(c.type.from_db(v)) for c, v in zip(schema.key, key, strict=True))
    return UniqueViolation(schema.name.rsplit(".", 1)[-1], columns, values)


def jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out[k] = jsonable(v)
        elif isinstance(v, bool | int | float | str) or v is None:
            out[k] = v
        else:
            out[k] = str(v)
    return out


def key_values(
    session: Session, cols: Sequence[ColumnSchema], where: ast.Expr | None, evaluator: Evaluator
) -> list[tuple[Any, ...]] | None:
    """Every combination of storage values that the ``col = v`` / ``col IN (...)`` conjuncts of
    ``where`` allow for ``cols``; None when a column is unrestricted (or a value cannot be its
    type). Callers still evaluate the whole WHERE on the rows they read."""
    if where is None:
        return None
    wanted = {c.name.lower(): c for c in cols}
    eq: dict[int, list[Any]] = {}
    for rel in conjuncts(where):
        col: ast.Expr | None = None
        items: tuple[ast.Expr, ...] = ()
        if isinstance(rel, ast.BinaryOp) and rel.op == "=":
            col, val = (rel.left, rel.right) if isinstance(rel.left, ast.Column) else (rel.right, rel.left)
            items = (val,)
        elif isinstance(rel, ast.InList) and not rel.negated:
            col, items = rel.expr, rel.items
        if not isinstance(col, ast.Column) or not all(is_const(x) for x in items):
            continue
        c = wanted.get(session.ident(col.name).lower())
        if c is None or c.id in eq:
            continue
        try:
            eq[c.id] = [coerce(c, evaluator.eval(x, None)) for x in items]
        except TypeMismatch:
            return None
    if not all(c.id in eq for c in cols):
        return None
    return list(dict.fromkeys(tuple(p) for p in itertools.product(*(eq[c.id] for c in cols))))


def enable_changes(session: Session, txn: Transaction, schema: TableSchema, on: bool) -> TableSchema:
    """Turn the change stream ``x<id>`` on (creating it) or off; returns the new schema."""
    if on and not schema.changes:
        txn.conn.execute(
            TableStore(schema).changes_create_sql().replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
        )
    new = replace(schema, changes=on, version=schema.version + 1)
    session.db.save_table(new)
    session.db.refresh_catalog()
    return session.db.table_by_id(new.id)


def log_base_table(session: Session, txn: Transaction, q: ast.QName, privilege: Privilege) -> TableSchema:
    """The base table of the CDC log ``q`` names (``<table>_scylla_cdc_log``), with ``privilege``
    on it checked: a CDC log is read and deleted from with its table's privileges. Missing, or
    without CDC: the log's own name does not exist."""
    name = session.table_name(q)
    last = q.parts[-1]
    base_q = ast.QName((*q.parts[:-1], ast.Ident(last.name[: -len(LOG_SUFFIX)], last.quoted)))
    try:
        base = session.resolve_table(txn, base_q)
    except UndefinedTable:
        raise UndefinedTable(f'table "{name}" does not exist') from None
    if not base.cdc.enabled:
        raise UndefinedTable(f'table "{name}" does not exist (CDC is not enabled on {base.name})')
    session.require(txn, base, privilege)
    return base
