"""CQL's selection functions of a cell: ``ttl(col)`` and ``writetime(col)``.

``ttl(v)`` is the number of seconds a cell written ``USING TTL`` has left: the store keeps each
such cell's expiry (``_exp``, :meth:`TableStore.cell_expiries`), and the remaining time is
measured against the transaction's clock (``Transaction.now_ns``), rounded up to whole seconds
(a live cell has at least 1 left; right after ``USING TTL 100`` it has 100). A cell without a
TTL, a null cell and a counter (whose cells never expire) give null. ScyllaDB's errors:
``Cannot use selection function ttl on PRIMARY KEY part pk``, ``Undefined name x in selection
clause``.

``writetime(v)`` would need every cell's write timestamp, which the store does not keep; it is
refused with one ``InvalidRequest`` sentence after the same checks of its argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import SqlType
from changefeed.exceptions import InvalidStatement, UnsupportedFeature
from changefeed.sql import ast
from changefeed.sql.session import Session
from changefeed.sql.statements.counters import is_counter
from changefeed.sql.statements.select import Relation

__all__ = ["TTL", "WRITETIME", "with_cell_functions"]

TTL = "ttl"
WRITETIME = "writetime"
#: How ScyllaDB's messages name each function.
_MESSAGE_NAMES = {TTL: "ttl", WRITETIME: "writeTime"}
_NS = 1_000_000_000
#: Hidden columns the functions' values travel in (no CQL column name holds a NUL).
_HIDDEN = "\x00"
_INT: SqlType = resolve_type("int", dialect="cql")


def with_cell_functions(
    session: Session, txn: Transaction, sel: ast.Select, rel: Relation, schema: TableSchema | None
) -> tuple[ast.Select, Relation]:
    """``sel`` with each ``ttl(col)`` replaced by a hidden column of ``rel`` that holds it."""
    calls: dict[str, ColumnSchema] = {}

    def rewrite(e: ast.Expr) -> ast.Expr:
        if not isinstance(e, ast.FuncCall):
            return e
        fn = e.name.lower()
        if fn not in _MESSAGE_NAMES:
            args = tuple(rewrite(a) for a in e.args)
            return dataclasses.replace(e, args=args) if args != e.args else e
        col = _argument(session, fn, e, schema, rel)
        if fn == WRITETIME:
            raise UnsupportedFeature(
                "writetime() is not supported: the store keeps no per-cell write timestamps"
            )
        calls[col.name] = col
        return ast.Column(ast.Ident(f"{_HIDDEN}{fn}({col.name})", quoted=True))

    items = []
    for it in sel.items:
        expr = rewrite(it.expr)
        alias = it.alias
        if alias is None and isinstance(it.expr, ast.FuncCall) and isinstance(expr, ast.Column):
            alias = ast.Ident(expr.name.name[len(_HIDDEN) :], quoted=True)  # ScyllaDB's ``ttl(v)``
        items.append(dataclasses.replace(it, expr=expr, alias=alias))
    assert schema is not None  # _argument refused anything else
    return dataclasses.replace(sel, items=tuple(items)), _relation(txn, rel, schema, list(calls.values()))


def _argument(
    session: Session, fn: str, call: ast.FuncCall, schema: TableSchema | None, rel: Relation
) -> ColumnSchema:
    """The column ``fn(col)`` reads, checked as ScyllaDB checks it."""
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Column):
        raise InvalidStatement(f"{fn}() takes one column name")
    name = session.ident(call.args[0].name)
    if schema is None:
        raise InvalidStatement(f"{fn}() of {rel.name} is not supported: only a table's cells keep a TTL here")
    col = next((c for c in schema.columns if c.name == name and not c.virtual), None)
    if col is None:
        raise InvalidStatement(f"Undefined name {name} in selection clause")
    if col.is_key:
        raise InvalidStatement(
            f"Cannot use selection function {_MESSAGE_NAMES[fn]} on PRIMARY KEY part {name}"
        )
    return col


def _relation(txn: Transaction, rel: Relation, schema: TableSchema, cols: list[ColumnSchema]) -> Relation:
    """``rel`` with one more column per cell function: the cell's remaining TTL in seconds."""
    st = txn.store(schema)
    index = {n: i for i, n in enumerate(rel.columns)}
    key_at = [index[c.name] for c in schema.key]
    pk_at = [index[c.name] for c in schema.partition_key]
    at = [index[c.name] for c in cols]
    key_from_db = [c.type.from_db for c in schema.key]
    pk_from_db = [c.type.from_db for c in schema.partition_key]
    counter = [is_counter(c) for c in cols]  # a counter's cells never expire

    def rows(pks: list[tuple[Any, ...]] | None) -> Iterator[tuple[Any, ...]]:
        stored_rows, stored_statics = st.cell_expiries(txn.conn)
        by_key = {tuple(f(v) for f, v in zip(key_from_db, k, strict=True)): e for k, e in stored_rows.items()}
        by_pk = {
            tuple(f(v) for f, v in zip(pk_from_db, k, strict=True)): e for k, e in stored_statics.items()
        }
        now = txn.now_ns
        for row in rel.rows(pks):
            extra: list[int | None] = []
            for c, i, never in zip(cols, at, counter, strict=True):
                if row[i] is None or never:
                    extra.append(None)
                    continue
                if c.role is Role.STATIC:
                    cells = by_pk.get(tuple(row[j] for j in pk_at))
                else:
                    cells = by_key.get(tuple(row[j] for j in key_at))
                expiry = cells.get(c.id) if cells is not None else None
                extra.append(None if expiry is None else max(1, -((now - expiry) // _NS)))
            yield (*row, *extra)

    hidden = [f"{_HIDDEN}{TTL}({c.name})" for c in cols]
    return dataclasses.replace(
        rel,
        columns=[*rel.columns, *hidden],
        types=[*rel.types, *([_INT] * len(cols))],
        rows=rows,
        star=rel.star if rel.star is not None else list(rel.columns),
    )
