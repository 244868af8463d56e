"""CQL's statements of its own (ScyllaDB semantics): ``INSERT .. JSON``, and a SELECT with
``GROUP BY`` (a primary-key prefix), ``PER PARTITION LIMIT``, ``JSON`` or ``ttl()``
(``cql_cells``). CQL's ``TRUNCATE`` is ``truncate``'s, with SQL's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import struct
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.ast_cql import calls_cell_function
from changefeed.sql.evaluator import Evaluator, Params, RowMap, Scope, conjuncts, has_aggregate, order_key
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import LOG_SUFFIX, key_values
from changefeed.sql.statements.cql_cells import with_cell_functions
from changefeed.sql.statements.select import Relation, relation, select_over

__all__ = ["FAMILY", "json_text"]

FAMILY = StatementFamily("cql")

#: The CDC log's primary key (``cdc$stream_id``, then its clustering columns).
_LOG_PARTITION = ("cdc$stream_id",)
_LOG_CLUSTERING = ("cdc$time", "cdc$batch_seq_no")


# ====================================================================== INSERT JSON
@FAMILY.statement(ast.InsertJson)
def insert_json(session: Session, txn: Transaction, s: ast.InsertJson, ev: Params) -> Result:
    """An INSERT of the columns the JSON object names (``DEFAULT NULL``: the others null)."""
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    text = evaluator.eval(s.json, None)
    if text is None:
        raise InvalidStatement("Got null for INSERT JSON values")
    if not isinstance(text, str):
        raise InvalidStatement("INSERT JSON takes a string")
    try:
        doc = json.loads(text, parse_float=Decimal)
    except ValueError as exc:
        raise InvalidStatement(f"Could not decode JSON string as a map: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidStatement(f"Could not decode JSON string as a map: {text}")
    schema = session.resolve_table(txn, s.table)
    given: dict[str, Any] = {}
    for key, value in doc.items():
        name = key[1:-1] if len(key) > 1 and key[0] == key[-1] == '"' else key.lower()
        given[name] = value
    columns: list[ast.Ident] = []
    values: list[Any] = []
    for c in schema.columns:
        if c.virtual:
            continue
        if c.name in given:
            columns.append(ast.Ident(c.name, True))
            values.append(_from_json(c, given.pop(c.name)))
        elif not s.default_unset and not c.is_key:
            columns.append(ast.Ident(c.name, True))
            values.append(None)
    if given:
        raise InvalidStatement(f"JSON values map contains unrecognized column: {next(iter(given))}")
    ttl = _literal(evaluator, s.ttl)
    timestamp = _literal(evaluator, s.timestamp)
    row = tuple(ast.Param(i) for i in range(len(values)))
    insert = ast.Insert(
        s.table,
        tuple(columns),
        (row,),
        if_not_exists=s.if_not_exists,
        ttl=ttl,
        timestamp=timestamp,
        pos=s.pos,
    )
    return session.statements.handler(insert).run(session, txn, insert, Params(values))


def _literal(evaluator: Evaluator, e: ast.Expr | None) -> ast.Expr | None:
    return None if e is None else ast.Literal(evaluator.eval(e, None))


def _from_json(c: ColumnSchema, v: Any) -> Any:
    """A JSON member's value as the column's type reads it (ScyllaDB takes a string in the CQL
    literal's form for every type, and the type's JSON form: numbers, booleans, ``"0x.."`` for
    blobs, milliseconds for timestamps); the type's coercion says what does not fit."""
    kind = c.type.kind
    if v is None:
        return None
    if kind is Kind.BYTES:
        if not isinstance(v, str) or not v.startswith("0x"):
            raise InvalidStatement(
                f"Error decoding JSON value for {c.name}: Blob JSON strings must start with 0x"
            )
        try:
            return bytes.fromhex(v[2:])
        except ValueError:
            raise InvalidStatement(f"Error decoding JSON value for {c.name}: invalid hex in {v}") from None
    if kind is Kind.FLOAT and isinstance(v, Decimal):
        return float(v)
    if kind in (Kind.INT, Kind.UINT, Kind.VARINT) and isinstance(v, Decimal):
        if v != v.to_integral_value():
            raise InvalidStatement(
                f"Error decoding JSON value for {c.name}: Incorrect JSON value for integer type: {v}"
            )
        return int(v)
    if kind is Kind.TEXT and not isinstance(v, str):
        raise InvalidStatement(
            f"Error decoding JSON value for {c.name}: {c.type.name} must be represented as string in JSON, instead got '{json.dumps(v, default=str)}'"
        )
    if kind in (Kind.UUID, Kind.TIMEUUID, Kind.DATE, Kind.TIME, Kind.INET, Kind.INTERVAL) and not isinstance(
        v, str
    ):
        raise InvalidStatement(
            f"Error decoding JSON value for {c.name}: {c.type.name} must be represented as string in JSON"
        )
    if isinstance(v, list | dict):
        raise InvalidStatement(
            f"Error decoding JSON value for {c.name}: {c.type.name} takes no JSON {type(v).__name__}"
        )
    return v


# ====================================================================== SELECT
@FAMILY.statement(ast.CqlSelect, write=False)
def cql_select(session: Session, txn: Transaction, s: ast.CqlSelect, ev: Params) -> Result:
    sel = s.select
    assert sel.table is not None
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    rel = relation(session, txn, sel.table)
    schema = session.db.find_table(rel.name)
    if any(calls_cell_function(it.expr) for it in sel.items):
        sel, rel = with_cell_functions(session, txn, sel, rel, schema)
    key = _primary_key(schema, rel)
    if sel.group_by and key is not None:
        _check_group_by(session, sel, *key)
    if s.per_partition_limit is not None:
        n = _per_partition_limit(evaluator, s.per_partition_limit)
        if sel.distinct:
            raise InvalidStatement("PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries")
        if not sel.group_by and any(has_aggregate(it.expr) for it in sel.items):
            raise InvalidStatement("PER PARTITION LIMIT is not allowed with aggregate queries.")
        partition = list(key[0]) if key is not None else list(rel.pk_columns)
        rel = _per_partition(session, rel, schema, sel, partition, n)
    res = select_over(session, txn, sel, ev, rel)
    if not s.json:
        return res
    types = list(res.types) if res.types else [None] * len(res.columns)
    rows = [(json_text(res.columns, types, r),) for r in res.rows]
    return Result(columns=["[json]"], rows=rows, types=[_TEXT], status=res.status, rowcount=res.rowcount)


_TEXT = resolve_type("text", dialect="cql")


def _primary_key(schema: TableSchema | None, rel: Relation) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The relation's partition-key and clustering-key column names (None: not known)."""
    if schema is not None:
        return tuple(c.name for c in schema.partition_key), tuple(c.name for c in schema.clustering_key)
    if rel.name.endswith(LOG_SUFFIX):
        return _LOG_PARTITION, _LOG_CLUSTERING
    return None


def _check_group_by(
    session: Session, sel: ast.Select, partition: Sequence[str], clustering: Sequence[str]
) -> None:
    """ScyllaDB's GROUP BY: primary-key columns in their key order, the whole partition key
    first; a column the WHERE restricts by ``=`` may be left out."""
    keys = [*partition, *clustering]
    by_lower = {k.lower(): k for k in keys}
    fixed = set()
    for rel in conjuncts(sel.where) if sel.where is not None else ():
        if isinstance(rel, ast.BinaryOp) and rel.op == "=":
            for side in (rel.left, rel.right):
                if isinstance(side, ast.Column):
                    fixed.add(session.ident(side.name))
    at = 0
    for g in sel.group_by:
        if not isinstance(g, ast.Column):
            raise InvalidStatement("Only column names are allowed in GROUP BY")
        name = session.ident(g.name)
        col = name if name in keys else None if g.name.quoted else by_lower.get(name.lower())
        if col is None:
            raise InvalidStatement(f"Group by non-primary-key column {name}")
        while at < len(keys) and keys[at] != col and keys[at] in fixed:
            at += 1
        if at >= len(keys) or keys[at] != col:
            raise InvalidStatement(f"Group by column {name} is out of order")
        at += 1
    if at < len(partition):
        raise InvalidStatement("GROUP BY must include the entire partition key")


def _per_partition_limit(evaluator: Evaluator, e: ast.Expr) -> int:
    n = evaluator.eval(e, None)
    if n is None:
        raise InvalidStatement("Invalid null value of limit")
    if not isinstance(n, int) or isinstance(n, bool) or not -(2**31) <= n < 2**31:
        raise InvalidStatement("Invalid limit value")
    if n <= 0:
        raise InvalidStatement("PER PARTITION LIMIT must be strictly positive")
    return n


def _per_partition(
    session: Session, rel: Relation, schema: TableSchema | None, sel: ast.Select, partition: list[str], n: int
) -> Relation:
    """``rel`` whose scan keeps, of each partition, the first ``n`` rows the WHERE holds for (in
    the ORDER BY's order when there is one), or the rows of its first ``n`` groups."""
    index = {name: i for i, name in enumerate(rel.columns)}
    lower_index: dict[str, int] = {}
    for name, i in index.items():
        lower_index.setdefault(name.lower(), i)
    at = [index[c] for c in partition if c in index]
    inner = rel.scan

    def scope(row: tuple[Any, ...]) -> Scope:
        return Scope(RowMap(row, index, lower_index))

    def scan(
        where: ast.Expr | None, evaluator: Evaluator
    ) -> tuple[Iterable[tuple[Any, ...]], ast.Expr | None]:
        rows: Iterable[tuple[Any, ...]]
        if inner is not None:
            rows, residual = inner(where, evaluator)
        else:
            pks = key_values(session, schema.partition_key, where, evaluator) if schema is not None else None
            rows, residual = rel.rows(pks), where
        if residual is not None:
            rows = [r for r in rows if evaluator.eval(residual, scope(r)) is True]
        ordered = list(rows)
        for o in reversed(sel.order_by):

            def by(r: tuple[Any, ...], o: ast.OrderItem = o) -> tuple[int, Any]:
                return order_key(evaluator.eval(o.expr, scope(r)), o)

            ordered.sort(key=by, reverse=o.descending)
        seen: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        kept = []
        for r in ordered:
            groups = seen.setdefault(tuple(r[i] for i in at), [])
            group = (
                tuple(evaluator.eval(g, scope(r)) for g in sel.group_by) if sel.group_by else (len(groups),)
            )
            if group not in groups:
                if len(groups) >= n:
                    continue
                groups.append(group)
            kept.append(r)
        return kept, None

    return dataclasses.replace(rel, scan=scan)


# ====================================================================== JSON
_PLAIN_NAME = re.compile(r"[a-z][a-z0-9_]*")


def json_text(columns: Sequence[str], types: Sequence[SqlType | None], row: Sequence[Any]) -> str:
    """A row as ``SELECT JSON`` gives it: an object of its columns (a name that is not a plain
    lower-case identifier in double quotes), each value in its type's JSON form."""
    parts = []
    for name, t, v in zip(columns, types, row, strict=True):
        key = name if _PLAIN_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'
        parts.append(f"{_json_string(key)}: {_json_value(t, v)}")
    return "{" + ", ".join(parts) + "}"


def _json_string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _json_value(t: SqlType | None, v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return "null"
        text = repr(v) if t is None or t.bits != 32 else _float32_text(v)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        return _json_string("0x" + v.hex())
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return _json_string(v.strftime("%Y-%m-%d %H:%M:%S.") + f"{v.microsecond // 1000:03d}Z")
    if isinstance(v, dt.date):
        return _json_string(v.isoformat())
    if isinstance(v, dt.time):
        return _json_string(f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond * 1000:09d}")
    if isinstance(v, dt.timedelta):
        return _json_string(_duration_text(v))
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_json_value(None, x) for x in v) + "]"
    if isinstance(v, uuid.UUID):
        return _json_string(str(v))
    return _json_string(str(v))


def _float32_text(v: float) -> str:
    """The shortest text that reads back as the same 32-bit float (ScyllaDB prints a float so)."""
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        if _as_float32(float(text)) == _as_float32(v):
            return repr(float(text))
    return repr(v)


def _as_float32(v: float) -> bytes:
    return struct.pack(">f", v)


def _duration_text(d: dt.timedelta) -> str:
    """A duration as CQL writes it (``1d2h3m4s5ms``)."""
    if d == dt.timedelta(0):
        return "0s"
    sign = "-" if d < dt.timedelta(0) else ""
    d = abs(d)
    ns = (d.seconds * 1_000_000 + d.microseconds) * 1000
    out = f"{d.days}d" if d.days else ""
    for unit, size in (
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1000),
        ("ns", 1),
    ):
        q, ns = divmod(ns, size)
        if q:
            out += f"{q}{unit}"
    return sign + out
