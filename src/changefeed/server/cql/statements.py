"""What the CQL endpoint needs to know of a statement before and after it runs: the bind markers'
names and types (PREPARE's metadata, and how bound values decode), the partition-key markers
(for drivers' token-aware routing), the result columns' CQL types, and the schema change a DDL
statement makes (its RESULT and the events sent to subscribers).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.exceptions import InvalidStatement
from changefeed.server.cql import system
from changefeed.server.cql.types import CqlType, of_sql, simple
from changefeed.sql import ast
from changefeed.sql.session import Session
from changefeed.sql.statements.cdc_log import META_COLUMNS
from changefeed.sql.statements.common import LOG_SUFFIX


@dataclass(frozen=True, slots=True)
class Spec:
    """One column of a metadata block: keyspace, table, name, type."""

    keyspace: str
    table: str
    name: str
    type: CqlType


@dataclass(frozen=True, slots=True)
class SchemaChange:
    change: str  # CREATED | UPDATED | DROPPED
    target: str  # KEYSPACE | TABLE
    keyspace: str
    name: str = ""


def statement_table(stmt: ast.Statement) -> ast.QName | None:
    for attr in ("table", "name"):
        q = getattr(stmt, attr, None)
        if isinstance(q, ast.QName):
            return q
    return None


def split_name(session: Session, q: ast.QName | None) -> tuple[str, str]:
    if q is None:
        return "", ""
    full = session.table_name(q)
    if "." in full:
        ks, name = full.split(".", 1)
        return ks, name
    return session.keyspace or "", full


# ====================================================================== column types
def column_types(session: Session, ks: str, table: str) -> dict[str, CqlType]:
    """Name -> CQL type of the columns of a table, a CDC log or a system table ({} if unknown)."""
    qualified = f"{ks}.{table}" if ks else table
    if qualified in system.TYPES and session.dialect == "cql":
        return system.TYPES[qualified]
    schema = session.db.find_table(qualified)
    if schema is not None:
        return {c.name: of_sql(c.type) for c in schema.columns}
    if table.endswith(LOG_SUFFIX):
        base = session.db.find_table(qualified[: -len(LOG_SUFFIX)])
        if base is not None:
            return log_types(base)
    return {}


def log_types(base: TableSchema) -> dict[str, CqlType]:
    out = {n: simple(t) for n, t in META_COLUMNS}
    stored = [c for c in base.columns if not c.virtual]
    out.update((c.name, of_sql(c.type)) for c in stored)
    out.update((f"cdc$deleted_{c.name}", simple("boolean")) for c in stored if not c.is_key)
    return out


def partition_key(session: Session, ks: str, table: str) -> list[str]:
    qualified = f"{ks}.{table}" if ks else table
    v = system.TABLES.get(qualified)
    if v is not None:
        return list(v.partition_key)
    schema = session.db.find_table(qualified)
    if schema is not None:
        return [c.name for c in schema.partition_key]
    if table.endswith(LOG_SUFFIX):
        return ["cdc$stream_id"]
    return []


# ====================================================================== bind markers
def bind_specs(session: Session, stmt: ast.Statement) -> tuple[list[Spec], list[int]]:
    """The bind markers of ``stmt`` in order, and which of them give the partition key."""
    ks, table = split_name(session, statement_table(stmt))
    types = column_types(session, ks, table)
    found: dict[int, Spec] = {}

    def spec(name: str, t: CqlType) -> Spec:
        return Spec(ks, table, name, t)

    def col_type(c: ast.Column) -> tuple[str, CqlType]:
        name = session.ident(c.name)
        t = types.get(name)
        if t is None:
            for k, v in types.items():
                if k.lower() == name.lower():
                    return k, v
        return name, t or simple("blob")

    def on_expr(e: ast.Expr | None, hint: tuple[str, CqlType] | None = None) -> None:
        if e is None:
            return
        if isinstance(e, ast.Param):
            name, t = hint if hint is not None else ("?", simple("blob"))
            found.setdefault(e.index, spec(e.name or name, t))
            return
        if isinstance(e, ast.BinaryOp):
            left_hint = right_hint = None
            if isinstance(e.left, ast.Column):
                right_hint = col_type(e.left)
            elif _is_token(e.left):
                right_hint = ("partition key token", simple("bigint"))
            if isinstance(e.right, ast.Column):
                left_hint = col_type(e.right)
            elif _is_token(e.right):
                left_hint = ("partition key token", simple("bigint"))
            on_expr(e.left, left_hint)
            on_expr(e.right, right_hint)
            return
        if isinstance(e, ast.InList):
            hint2 = col_type(e.expr) if isinstance(e.expr, ast.Column) else None
            on_expr(e.expr)
            for item in e.items:
                on_expr(item, hint2)
            return
        for child in _children(e):
            on_expr(child)

    if isinstance(stmt, ast.Insert):
        for col, value in zip(stmt.columns, stmt.rows[0] if stmt.rows else (), strict=False):
            on_expr(value, col_type(ast.Column(col)))
        on_expr(stmt.ttl, ("[ttl]", simple("int")))
        on_expr(stmt.timestamp, ("[timestamp]", simple("bigint")))
    elif isinstance(stmt, ast.Update):
        on_expr(stmt.ttl, ("[ttl]", simple("int")))
        on_expr(stmt.timestamp, ("[timestamp]", simple("bigint")))
        for ident, value in stmt.assignments:
            on_expr(value, col_type(ast.Column(ident)))
        on_expr(stmt.where)
    elif isinstance(stmt, ast.Delete):
        on_expr(stmt.timestamp, ("[timestamp]", simple("bigint")))
        on_expr(stmt.where)
    elif isinstance(stmt, ast.InsertJson):
        on_expr(stmt.json, ("[json]", simple("text")))
        on_expr(stmt.ttl, ("[ttl]", simple("int")))
        on_expr(stmt.timestamp, ("[timestamp]", simple("bigint")))
    elif isinstance(stmt, ast.Select | ast.CqlSelect):
        sel = stmt.select if isinstance(stmt, ast.CqlSelect) else stmt
        for item in sel.items:
            on_expr(item.expr)
        on_expr(sel.where)
        if isinstance(stmt, ast.CqlSelect):
            on_expr(stmt.per_partition_limit, ("[per_partition_limit]", simple("int")))
        on_expr(sel.limit, ("[limit]", simple("int")))
    specs = [found.get(i, spec("?", simple("blob"))) for i in range(max(found, default=-1) + 1)]
    # Partition-key markers (for routing): ``pk = ?`` for every partition-key column.
    pk_at: list[int] = []
    where = getattr(stmt, "where", None)
    pk_cols = partition_key(session, ks, table)
    by_col: dict[str, int] = {}
    if isinstance(stmt, ast.Insert):
        for col, value in zip(stmt.columns, stmt.rows[0] if stmt.rows else (), strict=False):
            if isinstance(value, ast.Param):
                by_col[session.ident(col)] = value.index
    elif where is not None:
        for rel in _conjuncts(where):
            if (
                isinstance(rel, ast.BinaryOp)
                and rel.op == "="
                and isinstance(rel.left, ast.Column)
                and isinstance(rel.right, ast.Param)
            ):
                by_col[session.ident(rel.left.name)] = rel.right.index
    if pk_cols and all(c in by_col for c in pk_cols):
        pk_at = [by_col[c] for c in pk_cols]
    return specs, pk_at


def _is_token(e: ast.Expr) -> bool:
    return isinstance(e, ast.FuncCall) and e.name.lower() == "token"


def _conjuncts(e: ast.Expr) -> Iterator[ast.Expr]:
    if isinstance(e, ast.BinaryOp) and e.op == "AND":
        yield from _conjuncts(e.left)
        yield from _conjuncts(e.right)
    else:
        yield e


def _children(e: ast.Expr) -> Iterator[ast.Expr]:
    for name in ("args", "items"):
        v = getattr(e, name, None)
        if isinstance(v, tuple):
            yield from (x for x in v if not isinstance(x, str | int))
    for name in ("operand", "expr", "low", "high"):
        v = getattr(e, name, None)
        if v is not None and not isinstance(v, str | int | ast.TypeName):
            yield v


# ====================================================================== results
def result_types(
    session: Session, stmt: ast.Statement, columns: Sequence[str], types: Sequence[Any], rows: Sequence[Any]
) -> list[CqlType]:
    """The CQL type of each result column: the table's, the system table's, or the value's."""
    ks, table = split_name(session, statement_table(stmt))
    virtual = system.TYPES.get(f"{ks}.{table}", {}) if session.dialect == "cql" else {}
    out = []
    for i, name in enumerate(columns):
        if name in virtual:
            out.append(virtual[name])
            continue
        t = types[i] if i < len(types) else None
        if t is not None:
            out.append(of_sql(t))
            continue
        out.append(_guess(next((r[i] for r in rows if r[i] is not None), None)))
    return out


def _guess(v: Any) -> CqlType:
    if isinstance(v, bool):
        return simple("boolean")
    if isinstance(v, int):
        return simple("bigint")
    if isinstance(v, float):
        return simple("double")
    if isinstance(v, Decimal):
        return simple("decimal")
    if isinstance(v, bytes):
        return simple("blob")
    if isinstance(v, uuid.UUID):
        return simple("timeuuid" if v.version == 1 else "uuid")
    if isinstance(v, dt.datetime):
        return simple("timestamp")
    if isinstance(v, dt.date):
        return simple("date")
    if isinstance(v, dt.time):
        return simple("time")
    if isinstance(v, dt.timedelta):
        return simple("duration")
    return simple("text")


# ====================================================================== schema changes
def schema_change(session: Session, stmt: ast.Statement) -> SchemaChange | None:
    """The schema change a DDL statement made (None for other statements)."""
    if isinstance(stmt, ast.CreateKeyspace):
        return SchemaChange("CREATED", "KEYSPACE", session.ident(stmt.name))
    if isinstance(stmt, ast.DropKeyspace):
        return SchemaChange("DROPPED", "KEYSPACE", session.ident(stmt.name))
    kinds = {ast.CreateTable: "CREATED", ast.DropTable: "DROPPED", ast.AlterTable: "UPDATED"}
    for cls, change in kinds.items():
        if isinstance(stmt, cls):
            ks, name = split_name(session, statement_table(stmt))
            return SchemaChange(change, "TABLE", ks, name)
    return None


def check_batchable(stmt: ast.Statement) -> None:
    if not isinstance(stmt, ast.Insert | ast.InsertJson | ast.Update | ast.Delete):
        raise InvalidStatement("Only INSERT, UPDATE, and DELETE statements are allowed in BATCH")
