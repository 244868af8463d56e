"""Reading the change stream ``x<id>`` as Arrow: the input of every changefeed.

One change row per (transaction, key): ``op`` is CHANGE_UPSERT (the row exists afterwards) or
CHANGE_ERASE; ``ox`` says whether the row existed before; ``c<id>`` is the new image (key columns
always set), ``u<id>`` whether the transaction wrote that column, ``o<id>`` the old image.
Initial scans produce rows of the same shape with ``op = CHANGE_SNAPSHOT``.

The Arrow schema uses the same names, with fixed metadata columns first::

    seq int64, ts int64 (commit wall ns), lg int32 (logical), tx int64 (transaction id),
    op int8, ox bool, st bool (static row), c<id>..., u<id> bool..., o<id>...

Values are converted from storage to Arrow in bulk, column by column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.types import Kind, SqlType

CHANGE_SNAPSHOT = 12

META_FIELDS = [
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("ts", pa.int64(), nullable=False),
    pa.field("lg", pa.int32(), nullable=False),
    pa.field("tx", pa.int64(), nullable=False),
    pa.field("op", pa.int8(), nullable=False),
    pa.field("ox", pa.bool_(), nullable=False),
    pa.field("st", pa.bool_(), nullable=False),
]


def arrow_type(t: SqlType) -> pa.DataType:
    """The Arrow (and so Spark) type carrying values of ``t``."""
    k = t.kind
    if k is Kind.BOOL:
        return pa.bool_()
    if k is Kind.INT:
        return pa.int64()
    if k is Kind.UINT:
        return pa.decimal128(20, 0) if t.bits == 64 else pa.int64()
    if k is Kind.FLOAT:
        return pa.float64()
    if k is Kind.DECIMAL:
        if t.precision is not None:
            return pa.decimal128(t.precision, t.scale or 0)
        return pa.string()
    if k is Kind.BYTES:
        return pa.binary()
    if k is Kind.DATE:
        return pa.date32()
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return pa.timestamp("us", tz="UTC")
    if k in (Kind.TIME, Kind.INTERVAL):
        return pa.int64()
    return pa.string()  # text, varint, json, uuid, inet, bit, enum, arrays (as JSON text)


def change_schema(schema: TableSchema) -> pa.Schema:
    fields = list(META_FIELDS)
    cols = schema.stored
    fields += [pa.field(c.db, arrow_type(c.type)) for c in cols]
    fields += [pa.field(f"u{c.id}", pa.bool_()) for c in cols if not c.is_key]
    fields += [pa.field(f"o{c.id}", arrow_type(c.type)) for c in cols if not c.is_key]
    return pa.schema(fields)


def storage_to_arrow(col: ColumnSchema, values: Sequence[Any]) -> pa.Array:
    """Convert one column of storage values to an Arrow array of ``arrow_type(col.type)``."""
    t = col.type
    at = arrow_type(t)
    k = t.kind
    if k is Kind.UINT and t.bits == 64:
        # Storage is the value minus 2**63 as a signed int64: flip the sign bit, view as uint64.
        raw = pa.array(values, type=pa.int64())
        flipped = pc.bit_wise_xor(raw, pa.scalar(-(1 << 63), pa.int64()))
        return pa.Array.from_buffers(pa.uint64(), len(raw), flipped.buffers(), raw.null_count).cast(at)
    if k is Kind.DECIMAL and t.precision is not None:
        try:  # column-wise parse of the stored text; anything Arrow refuses goes through Decimal
            return pa.array(values, type=pa.string()).cast(at)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([None if v is None else Decimal(v) for v in values], type=at)
    if k is Kind.DATE:
        return pa.array(values, type=pa.int32()).cast(at)
    if k is Kind.DATETIME:
        seconds = pa.array(values, type=pa.int64())
        return pc.multiply_checked(seconds, pa.scalar(1_000_000, pa.int64())).cast(at)
    if k is Kind.TIMESTAMP:
        return pa.array(values, type=pa.int64()).cast(at)
    if k is Kind.BOOL:
        return pa.array(values, type=pa.int8()).cast(pa.bool_())
    if k is Kind.VARINT:
        return pa.array([None if v is None else str(v) for v in values], type=at)
    return pa.array(values, type=at)


def storage_class(t: SqlType) -> pa.DataType | None:
    """The Arrow type a column of ``t`` is read as straight from storage (SQLite's INTEGER,
    REAL, TEXT or BLOB), before :func:`storage_arrow_to_arrow`; None: read it through Python."""
    k = t.kind
    if k is Kind.VARINT:
        return None  # stored as an integer or as text, by size
    if k in (
        Kind.BOOL,
        Kind.INT,
        Kind.UINT,
        Kind.DATE,
        Kind.TIMESTAMP,
        Kind.DATETIME,
        Kind.TIME,
        Kind.INTERVAL,
    ):
        return pa.int64()
    if k is Kind.FLOAT:
        return pa.float64()
    if k is Kind.BYTES:
        return pa.binary()
    return pa.string()


def storage_arrow_to_arrow(col: ColumnSchema, raw: pa.Array) -> pa.Array:
    """:func:`storage_to_arrow` of a column already read as ``storage_class(col.type)``."""
    t = col.type
    at = arrow_type(t)
    k = t.kind
    if k is Kind.UINT and t.bits == 64:
        flipped = pc.bit_wise_xor(raw, pa.scalar(-(1 << 63), pa.int64()))
        return pa.Array.from_buffers(pa.uint64(), len(raw), flipped.buffers(), raw.null_count).cast(at)
    if k is Kind.DECIMAL and t.precision is not None:
        try:
            return raw.cast(at)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return storage_to_arrow(col, raw.to_pylist())
    if k is Kind.DATE:
        return raw.cast(pa.int32()).cast(at)
    if k is Kind.DATETIME:
        return pc.multiply_checked(raw, pa.scalar(1_000_000, pa.int64())).cast(at)
    if k is Kind.BOOL:
        return raw.cast(pa.int8()).cast(pa.bool_())
    return raw.cast(at)


def read_changes(
    conn: sqlite3.Connection, schema: TableSchema, start_seq: int, end_seq: int, *, limit: int | None = None
) -> pa.RecordBatch:
    """Change rows with ``start_seq < seq <= end_seq`` as one Arrow record batch."""
    select = ", ".join(change_schema(schema).names)
    sql = f"SELECT {select} FROM x{schema.id} WHERE seq > ? AND seq <= ? ORDER BY seq"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = conn.execute(sql, (start_seq, end_seq)).fetchall()
    return rows_to_batch(schema, rows)


def rows_to_batch(schema: TableSchema, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    cols = schema.stored
    values = [c for c in cols if not c.is_key]
    target = change_schema(schema)
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [() for _ in target]
    arrays: list[pa.Array] = []
    for i, f in enumerate(META_FIELDS):
        if f.type == pa.bool_():
            arrays.append(pa.array(columns[i], type=pa.int8()).cast(pa.bool_()))
        else:
            arrays.append(pa.array(columns[i], type=f.type))
    base = len(META_FIELDS)
    for j, c in enumerate(cols):
        arrays.append(storage_to_arrow(c, columns[base + j]))
    base += len(cols)
    for j, _ in enumerate(values):
        arrays.append(pa.array(columns[base + j], type=pa.int8()).cast(pa.bool_()))
    base += len(values)
    for j, c in enumerate(values):
        arrays.append(storage_to_arrow(c, columns[base + j]))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


__all__ = [
    "CHANGE_SNAPSHOT",
    "META_FIELDS",
    "arrow_type",
    "change_schema",
    "read_changes",
    "rows_to_batch",
    "storage_arrow_to_arrow",
    "storage_class",
    "storage_to_arrow",
]
