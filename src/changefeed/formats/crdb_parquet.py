"""CockroachDB's parquet changefeed format (``format = parquet``; cloud-storage sinks only:
``this sink is incompatible with format=parquet`` elsewhere), registered as ``crdb-parquet``.

A file holds rows, one per change (CockroachDB's ``parquet.go``): the watched columns in table
order (a CDC query: its projection, in its order), then the metadata columns

=========================  =====================================================================
``__crdb__event_type``     ``c`` an insert (and an initial-scan row), ``u`` an update, ``d`` a
                           delete (whose non-key columns are NULL)
``__crdb__updated``        with ``updated``: the commit time, an HLC decimal as text
``__crdb__mvcc_timestamp`` with ``mvcc_timestamp``: the same, the row's MVCC timestamp
``__crdb__before``         with ``diff``: the previous row as CockroachDB's JSON (NULL if none)
=========================  =====================================================================

Column types (``util/parquet/schema.go``): BOOL boolean, INT2/INT4 int32, INT8 int64, FLOAT4
float, FLOAT8 double, BYTES binary, TIME int64 (microseconds), arrays LIST of their element, and
text (``tree.FmtExport``) for STRING, UUID, DATE, TIMESTAMP(TZ), INTERVAL, INET, ENUM, BIT and
JSONB. Departures, so that Spark, pyarrow and DuckDB read every file: a ``DECIMAL(p,s)`` is a
standard ``DECIMAL(p,s)`` (CockroachDB writes the decimal's text under a DECIMAL annotation,
which these readers refuse), an unconstrained ``DECIMAL`` its text; TIME has no ``TIME(MICROS)``
annotation, UUID and JSONB no UUID/JSON one (Spark refuses all three).

The sink writes the files; the encoder hands it one record per change whose value is a compact
JSON array of the row's parquet values (the transport between the encoder and the sink, never
shown to anyone) and whose key is the row's CockroachDB JSON key (partitioning as JSON feeds).
:func:`parquet_file` turns a run of those values into one parquet file. The Spark face runs the
Python face over Arrow batches (``mapInArrow``), after a CDC query's predicate and projection as
Spark column expressions, so the two faces are one function.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.catalog import ColumnSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE, CHANGE_UPSERT
from changefeed.engine.types import Kind, SqlType
from changefeed.feeds.cdc_plan import is_canonical_json
from changefeed.feeds.crdb_options import ENVELOPE_ROW
from changefeed.formats import crdb_values as V
from changefeed.formats.base import Encoder, Record, map_records, partition_of, register
from changefeed.formats.cdc_eval import apply_spark, evaluate_batch, output_columns
from changefeed.formats.crdb_json import CrdbJsonEncoder, options_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec

EXTENSION = ".parquet"
EVENT_TYPE = "__crdb__event_type"
UPDATED = "__crdb__updated"
MVCC_TIMESTAMP = "__crdb__mvcc_timestamp"
BEFORE = "__crdb__before"

_FLOAT_WORDS = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}


# ============================================================================ layout
@dataclass(frozen=True, slots=True)
class ParquetLayout:
    """The columns of a feed's parquet files: (name, SQL type) of the row columns, then the
    metadata columns its options ask for."""

    columns: tuple[tuple[str, SqlType], ...]
    updated: bool = False
    mvcc: bool = False
    before: bool = False

    @staticmethod
    def of(table: TableSchema, feed: FeedSpec) -> ParquetLayout:
        opts = options_of(feed)
        cols = _row_columns(table, feed)
        return ParquetLayout(
            columns=tuple((c.name, c.type) for c in cols),
            updated=opts.updated,
            mvcc=opts.mvcc_timestamp,
            before=opts.diff,
        )

    @property
    def names(self) -> list[str]:
        meta = [EVENT_TYPE] + [UPDATED] * self.updated + [MVCC_TIMESTAMP] * self.mvcc + [BEFORE] * self.before
        return [n for n, _ in self.columns] + meta

    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        fields = [pa.field(n, parquet_type(t)) for n, t in self.columns]
        fields += [pa.field(n, pa.string()) for n in self.names[len(self.columns) :]]
        return pa.schema(fields)


def _row_columns(table: TableSchema, feed: FeedSpec) -> list[ColumnSchema]:
    if feed.query is not None:
        return list(output_columns(feed.query))
    return [c for c in table.stored]


def parquet_type(t: SqlType) -> pa.DataType:
    """The Arrow type of a column of ``t`` in a parquet file (see the module docstring)."""
    import pyarrow as pa

    k = t.kind
    if k is Kind.BOOL:
        return pa.bool_()
    if k is Kind.INT:
        return pa.int32() if t.bits <= 32 else pa.int64()
    if k is Kind.UINT:
        return pa.uint64() if t.bits == 64 else pa.int64()
    if k is Kind.FLOAT:
        return pa.float32() if t.bits == 32 else pa.float64()
    if k is Kind.DECIMAL and t.precision is not None and t.precision <= 38:
        return pa.decimal128(t.precision, t.scale or 0)
    if k is Kind.BYTES:
        return pa.binary()
    if k is Kind.TIME:
        return pa.int64()  # microseconds; no TIME annotation (Spark refuses it)
    if k is Kind.ARRAY and t.element is not None:
        return pa.list_(parquet_type(t.element))
    return pa.string()


# ============================================================================ the encoder's values
def _to_transport(t: SqlType) -> Callable[[Any], Any]:
    """A value of the change batch (``to_pylist`` of its Arrow column) -> its JSON transport."""
    k = t.kind
    if k in (Kind.BOOL, Kind.INT):
        return lambda v: v
    if k is Kind.UINT:
        return lambda v: None if v is None else int(v)
    if k is Kind.FLOAT:

        def flt(v: Any) -> Any:
            if v is None or math.isfinite(v):
                return v
            return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")

        return flt
    if k is Kind.DECIMAL:
        return lambda v: None if v is None else str(v)
    if k is Kind.BYTES:
        return lambda v: None if v is None else bytes(v).hex()
    if k is Kind.DATE:
        return lambda v: None if v is None else v.isoformat()
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        zoned = t.zoned and k is Kind.TIMESTAMP

        def ts(v: Any) -> Any:
            if v is None:
                return None
            text = v.strftime("%Y-%m-%d %H:%M:%S") + (
                f".{v.microsecond:06d}".rstrip("0") if v.microsecond else ""
            )
            return text + "+00:00" if zoned else text

        return ts
    if k is Kind.TIME:
        return lambda v: None if v is None else int(v) // 1000
    if k is Kind.INTERVAL:
        return lambda v: None if v is None else V.interval_text(int(v))[1:-1]
    if k is Kind.ARRAY and t.element is not None:
        el = t.element
        inner = _from_json_element(el)
        return lambda v: None if v is None else [inner(x) for x in orjson.loads(v)]
    if k is Kind.JSON and not is_canonical_json(t):  # CockroachDB's JSONB text: sorted keys, spaced
        return lambda v: None if v is None else V.json_document(json_doc.loads(v))
    return lambda v: v if v is None or isinstance(v, str) else str(v)


def _from_json_element(t: SqlType) -> Callable[[Any], Any]:
    """An array element as the engine stores arrays (JSON) -> its transport value."""
    if t.kind in (Kind.BOOL, Kind.INT, Kind.UINT):
        return lambda v: v
    if t.kind is Kind.FLOAT:
        return lambda v: v if v is None or isinstance(v, int | float) else float(v)
    return lambda v: v if v is None or isinstance(v, str) else orjson.dumps(v).decode()


def _from_transport(t: SqlType) -> Callable[[list[Any]], pa.Array]:
    """A column of transport values -> the Arrow array written to the parquet file."""
    import pyarrow as pa

    at = parquet_type(t)
    k = t.kind
    if k is Kind.FLOAT:
        return lambda vs: pa.array([_FLOAT_WORDS.get(v, v) if isinstance(v, str) else v for v in vs], at)
    if k is Kind.DECIMAL and pa.types.is_decimal(at):
        return lambda vs: pa.array([None if v is None else Decimal(v) for v in vs], at)
    if k is Kind.BYTES:
        return lambda vs: pa.array([None if v is None else bytes.fromhex(v) for v in vs], at)
    return lambda vs: pa.array(vs, at)


def transport_values(
    batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, *, evaluated: bool = False
) -> tuple[pa.RecordBatch, list[bytes]]:
    """The batch's rows (after a CDC query) and their transport values (JSON arrays)."""
    if feed.query is not None and not evaluated:
        batch = evaluate_batch(feed.query, batch, table, diff=True)
    n = batch.num_rows
    if n == 0:
        return batch, []
    layout = ParquetLayout.of(table, feed)
    cols = _row_columns(table, feed)
    op = batch.column("op").to_pylist()
    ox = batch.column("ox").to_pylist()
    columns: list[list[Any]] = []
    for c in cols:
        conv = _to_transport(c.type)
        values = batch.column(c.db).to_pylist()
        if feed.query is None and not c.is_key:
            values = [None if o == CHANGE_ERASE else v for v, o in zip(values, op, strict=True)]
        columns.append([conv(v) for v in values])
    columns.append(
        [
            "d" if o == CHANGE_ERASE else ("u" if x and o != CHANGE_SNAPSHOT else "c")
            for o, x in zip(op, ox, strict=True)
        ]
    )
    if layout.updated or layout.mvcc:
        ts, lg = batch.column("ts").to_pylist(), batch.column("lg").to_pylist()
        stamps = [f"{w}.{g:010d}" for w, g in zip(ts, lg, strict=True)]
        columns += [stamps] * (int(layout.updated) + int(layout.mvcc))
    if layout.before:
        columns.append(_before_texts(batch, table, feed, ox, op))
    rows = [orjson.dumps(list(r)) for r in zip(*columns, strict=True)]
    return batch, rows


def _before_texts(
    batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, ox: list[Any], op: list[Any]
) -> list[str | None]:
    """The previous row of each change as CockroachDB's JSON (``diff``), NULL where none."""
    import pyarrow as pa

    swapped = batch
    for c in table.stored:
        if not c.is_key:
            i = swapped.schema.get_field_index(c.db)
            swapped = swapped.set_column(i, c.db, batch.column(f"o{c.id}"))
    swapped = swapped.set_column(
        swapped.schema.get_field_index("op"),
        "op",
        pa.array([CHANGE_UPSERT] * batch.num_rows, batch.schema.field("op").type),
    )
    plain = replace(
        options_of(feed),
        envelope=ENVELOPE_ROW,
        diff=False,
        updated=False,
        mvcc_timestamp=False,
        key_in_value=False,
        topic_in_value=False,
    )
    row_feed = replace(feed, query=None, crdb=plain)
    _keys, values = CrdbJsonEncoder().encode_arrow(swapped, table, row_feed)
    texts = values.to_pylist()
    return [
        bytes(t).decode() if x and o != CHANGE_SNAPSHOT else None
        for t, x, o in zip(texts, ox, op, strict=True)
    ]


def _keys(batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[bytes]:
    """CockroachDB's JSON key of each row (the records' keys: partitioning as JSON feeds)."""
    key_texts = [V.arrow_values(batch.column(c.db), c.type) for c in table.key]
    import pyarrow.compute as pc

    joined = key_texts[0] if len(key_texts) == 1 else pc.binary_join_element_wise(*key_texts, ", ")
    keys = pc.binary_join_element_wise("[", joined, "]", "")
    return [k.encode() if isinstance(k, str) else bytes(k) for k in keys.to_pylist()]


# ============================================================================ files
def parquet_file(values: Sequence[bytes], layout: ParquetLayout, compression: str | None = None) -> bytes:
    """One parquet file of the rows whose transport ``values`` the encoder made."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [orjson.loads(v) for v in values]
    width = len(layout.names)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]
    arrays = [_from_transport(t)(list(columns[i])) for i, (_n, t) in enumerate(layout.columns)]
    arrays += [pa.array(list(columns[i]), pa.string()) for i in range(len(layout.columns), width)]
    table = pa.Table.from_arrays(arrays, schema=layout.arrow_schema())
    buf = io.BytesIO()
    pq.write_table(table, buf, compression={"gzip": "gzip", "zstd": "zstd"}.get(compression or "", "snappy"))
    return buf.getvalue()


# ============================================================================ the encoder
class CrdbParquetEncoder(Encoder):
    name = "crdb-parquet"

    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        return self._encode(batch, table, feed, evaluated=False)

    def _encode(
        self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, *, evaluated: bool
    ) -> list[Record]:
        batch, values = transport_values(batch, table, feed, evaluated=evaluated)
        if not values:
            return []
        keys = _keys(batch, table, feed)
        ts = batch.column("ts").to_pylist()
        return [
            (partition_of(k, feed.partitions), k, v, int(t)) for k, v, t in zip(keys, values, ts, strict=True)
        ]

    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        evaluated = feed.query is not None
        if feed.query is not None:
            df = apply_spark(feed.query, df, table, diff=True)
        encode = self._encode
        return map_records(df, lambda b: encode(b, table, feed, evaluated=evaluated))

    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        """The ``.RESOLVED`` file's content: CockroachDB's JSON resolved message, as with JSON."""
        return CrdbJsonEncoder().resolved(ts, tx, feed)


@register("crdb-parquet")
def _factory() -> Encoder:
    return CrdbParquetEncoder()


__all__ = [
    "BEFORE",
    "EVENT_TYPE",
    "EXTENSION",
    "MVCC_TIMESTAMP",
    "UPDATED",
    "CrdbParquetEncoder",
    "ParquetLayout",
    "parquet_file",
    "parquet_type",
    "transport_values",
]
