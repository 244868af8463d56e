"""CockroachDB Avro changefeed records (format ``crdb-avro``) in the Confluent wire format.

Each message key and value is ``0x00`` + the 4-byte big-endian schema id + the Avro binary datum
(see :mod:`changefeed.formats.avro_schema` for the schemas). Keys are the key record
(``{"a": {"long": 0}}``); values depend on the envelope:

* ``wrapped`` (default): ``{"after": row | null}``, plus ``before`` with ``diff`` (the old row,
  null when the row did not exist before or for initial-scan rows), ``updated`` and
  ``mvcc_timestamp`` (CockroachDB's HLC decimal ``<wall ns>.<logical, 10 digits>``) when asked;
* ``bare``: ``{"record": row}``; a delete carries only the key columns;
* ``key_only``: the value is empty;
* ``enriched``: ``before`` (diff), ``after``, ``source`` (enriched_properties=source: the
  changefeed, database and table, the commit time with ``updated``, the MVCC time with
  ``mvcc_timestamp``), ``ts_ns`` (processing time) and ``op`` (``c``/``u``/``d``).

With a CDC query (``feed.query``) the row record is the projection (evaluated first by
:mod:`changefeed.formats.cdc_eval`: Arrow on the Python face, Spark column expressions on the
Spark face), named after the table, without ``__crdb__``; ``before`` stays the whole previous row.

Schema ids come from a :class:`~changefeed.formats.schema_registry.SchemaResolver` injected into
the encoder (a caching registry client by default), asked once per schema on the driver, under the
subjects ``<prefix><topic>-key`` and ``-value``. A table whose schema changed gets new schemas, so
new versions are registered under the same subjects; every field is a nullable union with a null
default, so each version reads the others.

Encoding writes the Avro binary of a whole Arrow batch column by column
(:mod:`changefeed.formats.avro_columns`: numpy for longs, doubles, booleans and union branches, the
Arrow string/bytes columns as they are, rows joined by an Arrow kernel); the types it does not
write (DECIMAL, arrays, BIT, INTERVAL, JSONB) go through fastavro per value. The Spark face runs
the same function over change-row Arrow batches with ``mapInArrow`` on the executors (Spark has no
Avro writer without the external spark-avro jar; the schemas and ids travel in the closure), and
the topic partition is Spark's own ``pmod(xxhash64(key), n)``.
"""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import UnsupportedFeature
from changefeed.feeds.cdc_plan import COL, FN, PREV, PREVROW, CdcQuery, PExpr, is_canonical_json
from changefeed.formats import avro_schema as S
from changefeed.formats.avro_columns import VALUE_BRANCH, Mask, RowWriter, binary_from
from changefeed.formats.base import Encoder, Record, partition_of, register
from changefeed.formats.cdc_eval import apply_spark, evaluate_batch, output_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import ColumnSchema, TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec
    from changefeed.formats.schema_registry import SchemaResolver

US_PER_DAY = 86_400_000_000
WORD = 64
_MASK64 = (1 << 64) - 1

# ============================================================================ value conversions


def bits_to_longs(bits: str) -> list[int]:
    """A BIT/VARBIT value as CockroachDB's Avro array: ``[bits used in the last word, words...]``.

    Words are 64 bits, most significant first, the last padded with zeros on the right, written
    as signed longs (``B'010'`` -> ``[3, 4611686018427387904]``).
    """
    n = len(bits)
    words = []
    for i in range(0, n, WORD):
        chunk = bits[i : i + WORD].ljust(WORD, "0")
        w = int(chunk, 2)
        words.append(w - (1 << 64) if w >= 1 << 63 else w)
    used = n - WORD * (len(words) - 1) if words else 0
    return [used, *words]


def longs_to_bits(arr: list[int]) -> str:
    """The inverse of :func:`bits_to_longs` (how a consumer reads the array back)."""
    if len(arr) <= 1:
        return ""
    words = [format(w & _MASK64, "064b") for w in arr[1:]]
    return "".join(words[:-1]) + words[-1][: arr[0]]


def interval_iso8601(us: int) -> str:
    """An interval (microseconds) in CockroachDB's ISO 8601 form: ``P3DT4H5M6S``, ``PT-0.006S``."""
    if us == 0:
        return "PT0S"
    days, rest = divmod(abs(us), US_PER_DAY)
    sign = "-" if us < 0 else ""
    out = "P" + (f"{sign}{days}D" if days else "")
    if rest:
        hours, rest = divmod(rest, 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        secs, frac = divmod(rest, 1_000_000)
        out += "T"
        if hours:
            out += f"{sign}{hours}H"
        if minutes:
            out += f"{sign}{minutes}M"
        if secs or frac:
            s = str(secs) + (f".{frac:06d}".rstrip("0") if frac else "")
            out += f"{sign}{s}S"
    return out


def jsonb_text(stored: str) -> str:
    """JSONB as CockroachDB prints it: keys sorted, ``", "`` and ``": "`` separators."""
    return json_doc.spaced(json_doc.loads(stored), sort_keys=True)


def _element_converter(t: SqlType) -> Callable[[Any], Any]:
    """Array element storage value (as stored in the array's JSON text) -> Avro value."""
    k = t.kind
    if k is Kind.BOOL:
        return bool
    if k is Kind.BYTES:
        return lambda x: bytes.fromhex(x["$b"]) if isinstance(x, dict) else x
    if k is Kind.TIME:
        return lambda x: x // 1000
    if k is Kind.INTERVAL:
        return interval_iso8601
    if k is Kind.BIT:
        return bits_to_longs
    if k is Kind.FLOAT:
        return float
    if k is Kind.JSON:
        return jsonb_text
    return lambda x: x


def column_values(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> list[Any]:
    """One Arrow column of change rows (``changes.arrow_type(t)``) as Avro datum values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    k = t.kind
    if k is Kind.DATE:
        return arr.cast(pa.int32()).to_pylist()  # type: ignore[no-any-return]
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        if pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("us")).cast(pa.int64())
        return arr.to_pylist()  # type: ignore[no-any-return]
    if k is Kind.TIME:
        return pc.divide(arr.cast(pa.int64()), 1000).to_pylist()  # type: ignore[no-any-return]
    if k is Kind.INTERVAL:
        return [None if v is None else interval_iso8601(v) for v in arr.to_pylist()]
    if k is Kind.BIT:
        return [None if v is None else bits_to_longs(v) for v in arr.to_pylist()]
    if k is Kind.ARRAY:
        assert t.element is not None
        conv = _element_converter(t.element)
        return [
            None if v is None else [None if x is None else conv(x) for x in orjson.loads(v)]
            for v in arr.to_pylist()
        ]
    if k is Kind.JSON:
        return [None if v is None else jsonb_text(v) for v in arr.to_pylist()]
    if k is Kind.FLOAT:
        return arr.cast(pa.float64()).to_pylist()  # type: ignore[no-any-return]
    return arr.to_pylist()  # type: ignore[no-any-return]


# ============================================================================ the batch plan


@dataclass(frozen=True, slots=True)
class AvroPlan:
    """Everything an executor needs to encode a table's change rows: picklable, no I/O."""

    table: TableSchema
    opts: S.AvroOptions
    partitions: int
    key_schema: dict[str, Any]
    key_id: int
    value_schema: dict[str, Any] | None
    value_id: int
    #: the row record's columns (``after``/``record``): the table's, or a CDC query's outputs
    #: (evaluated into the batch already, see :mod:`changefeed.formats.cdc_eval`)
    row_cols: tuple[ColumnSchema, ...] = ()
    projected: bool = False
    #: ``before`` is written (diff; a query reading ``cdc_prev`` too), from the whole old row
    diff: bool = False
    #: envelope=enriched with enriched_properties=source: the source record's fixed fields
    source: EnrichedSource | None = None


@dataclass(frozen=True, slots=True)
class EnrichedSource:
    """The enriched envelope's ``source`` record: its Avro binary before, between and after
    the per-event fields (``mvcc_timestamp``; ``ts_hlc`` and ``ts_ns``), in field order."""

    head: bytes  # branch of the record, changefeed_sink .. job_id
    middle: bytes  # node_id .. table_name
    mvcc: bool
    updated: bool

    @staticmethod
    def of(table: TableSchema, opts: S.AvroOptions) -> EnrichedSource:
        from changefeed.formats.crdb_enriched import (
            NODE_ID,
            NODE_NAME,
            ORIGIN,
            SCHEMA_NAME,
            database_of,
            db_version,
        )

        def text(v: str) -> bytes:
            return _text(v)

        keys = [c.name.encode() for c in table.key]
        primary_keys = _SOME + zigzag(len(keys)) + b"".join(zigzag(len(k)) + k for k in keys) + b"\x00"
        head = _SOME + b"".join(
            text(v)
            for v in (
                opts.sink_kind,  # changefeed_sink
                opts.cluster_id,  # cluster_id
                "",  # cluster_name
                database_of(table),  # database_name
                db_version(),  # db_version
                str(opts.job_id),  # job_id
            )
        )
        middle = (
            text(NODE_ID)
            + text(NODE_NAME)
            + text(ORIGIN)
            + primary_keys
            + text(SCHEMA_NAME)
            + text("")  # source_node_locality
            + text(table.short_name)  # table_name
        )
        return EnrichedSource(head, middle, opts.mvcc_timestamp, opts.updated)


def frame(schema_id: int) -> bytes:
    return S.MAGIC + struct.pack(">I", schema_id)


def _writer(schema: Any) -> Callable[[Any], bytes]:
    """A datum -> Avro binary function over a schema parsed once."""
    import fastavro

    parsed = fastavro.parse_schema(schema)
    write = fastavro.schemaless_writer
    buf = io.BytesIO()

    def encode(datum: Any) -> bytes:
        buf.seek(0)
        buf.truncate()
        write(buf, parsed, datum)
        return buf.getvalue()

    return encode


# ============================================================================ binary, column-wise
#
# An Avro record's binary form is the concatenation of its fields' encodings, and a union's is the
# branch index (zig-zag varint) followed by the value. A batch's keys and values are written field
# by field into a RowWriter (formats/avro_columns.py) without a Python step per row for the common
# types; ``field_bytes`` is the per-value writer (one byte string per row) for the others, and the
# reference the column-wise writer is tested against.

_NULL = b"\x00"  # union branch 0: null
_SOME = b"\x02"  # union branch 1
_SMALL = [bytes([z]) for z in range(128)]
_TRUE, _FALSE = _SOME + b"\x01", _SOME + b"\x00"
_pack_double = struct.Struct("<d").pack
_LONG_LOGICAL = {"date", "time-micros", "timestamp-micros"}


def zigzag(n: int) -> bytes:
    """An Avro ``int``/``long``: zig-zag, then a little-endian base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL[z]
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _text(v: str) -> bytes:
    b = v.encode()
    return _SOME + zigzag(len(b)) + b


def field_bytes(values: list[Any], union: list[Any]) -> list[bytes]:
    """One column's values (Avro-ready) encoded as the field's union, one byte string per row."""
    inner = union[1]
    kind = inner if isinstance(inner, str) else None
    if isinstance(inner, dict) and inner.get("logicalType") in _LONG_LOGICAL and len(union) == 2:
        kind = "long"
    if kind == "long":
        return [_NULL if v is None else _SOME + zigzag(v) for v in values]
    if kind == "string":
        return [_NULL if v is None else _text(v) for v in values]
    if kind == "boolean":
        return [_NULL if v is None else (_TRUE if v else _FALSE) for v in values]
    if kind == "double":
        return [_NULL if v is None else _SOME + _pack_double(v) for v in values]
    if kind == "bytes":
        return [_NULL if v is None else _SOME + zigzag(len(v)) + v for v in values]
    write = _writer(union)
    return [_NULL if v is None else write(v) for v in values]


_STRING_KINDS = (Kind.TEXT, Kind.UUID, Kind.TIMEUUID, Kind.INET, Kind.ENUM, Kind.BYTES)
_LONG_KINDS = (Kind.INT, Kind.UINT, Kind.DATE, Kind.TIME, Kind.TIMESTAMP, Kind.DATETIME)


def _long_column(arr: pa.Array, k: Kind) -> pa.Array:
    """The Avro long/int values of an integer-like column (as :func:`column_values` gives them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if k is Kind.DATE:
        return arr.cast(pa.int32()).cast(pa.int64())
    if k in (Kind.TIMESTAMP, Kind.DATETIME) and pa.types.is_timestamp(arr.type):
        return arr.cast(pa.timestamp("us")).cast(pa.int64())
    if k is Kind.TIME:
        return pc.divide(arr.cast(pa.int64()), 1000)
    return arr.cast(pa.int64())


def _valid(arr: pa.Array, also: Mask | None) -> Mask | None:
    """Rows holding a value: the column's non-nulls, and ``also`` (None: every row)."""
    import numpy as np

    valid = np.asarray(arr.is_valid()) if arr.null_count else None
    if also is None:
        return valid
    return also if valid is None else valid & also


def write_field(
    w: RowWriter, arr: pa.Array | None, c: ColumnSchema, present: Mask | None, valid: Mask | None = None
) -> None:
    """Write one column of a batch as its record field, column-wise.

    ``arr`` is the change-row column (None: a virtual column, always null); ``present`` says
    where the enclosing record exists; ``valid`` nulls further rows (a bare delete's values).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr is None:
        w.constant(_NULL, present)
        return
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    k, union = c.type.kind, S.field_type(c)
    t = arr.type
    if (k in _STRING_KINDS or is_canonical_json(c.type)) and (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        if valid is not None:
            arr = pc.if_else(pa.array(valid), arr, pa.scalar(None, arr.type))
        w.union_binary(arr, present)
    elif union[1] in ("long", _DATE, _TIME, _TIMESTAMP) and k in _LONG_KINDS:
        longs = _long_column(arr, k)
        w.union_long(longs.fill_null(0).to_numpy(), _valid(longs, valid), present)
    elif k is Kind.FLOAT:
        doubles = arr.cast(pa.float64())
        w.union_double(doubles.fill_null(0.0).to_numpy(), _valid(doubles, valid), present)
    elif k is Kind.BOOL and pa.types.is_boolean(t):
        w.union_boolean(arr.fill_null(False).to_numpy(zero_copy_only=False), _valid(arr, valid), present)
    else:  # decimal, arrays, BIT, INTERVAL, JSONB: fastavro per value
        values = column_values(arr, c.type)
        if valid is not None:
            values = [v if ok else None for v, ok in zip(values, valid.tolist(), strict=True)]
        encoded = field_bytes(values, union)
        if present is not None:
            encoded = [b if ok else b"" for b, ok in zip(encoded, present.tolist(), strict=True)]
        w.piece(pa.array(encoded, pa.binary()))


_DATE = {"type": "int", "logicalType": "date"}
_TIME = {"type": "long", "logicalType": "time-micros"}
_TIMESTAMP = {"type": "long", "logicalType": "timestamp-micros"}


def _hlc_text(batch: pa.RecordBatch) -> pa.Array:
    """CockroachDB's HLC decimal ``<wall ns>.<logical, 10 digits>`` of every row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wall = batch.column("ts").cast(pa.string())
    logical = pc.utf8_lpad(batch.column("lg").cast(pa.string()), 10, "0")
    return pc.binary_join_element_wise(wall, logical, ".")


def encode_columns(batch: pa.RecordBatch, plan: AvroPlan) -> tuple[pa.Array, pa.Array]:
    """Encode a batch of change rows column-wise: the framed (key, value) binary columns.

    With a CDC query the batch holds its outputs already (``evaluate_batch``/``apply_spark``)."""
    import numpy as np

    n = batch.num_rows
    table, opts = plan.table, plan.opts

    def column(c: ColumnSchema, old: bool = False) -> pa.Array | None:
        if c.virtual:  # virtual_columns='null'
            return None
        return batch.column(f"o{c.id}" if old and not c.is_key else c.db)

    kw = RowWriter(n)
    kw.constant(frame(plan.key_id))
    for c in table.key:
        write_field(kw, column(c), c, None)
    keys = kw.finish()
    if plan.value_schema is None:  # key_only
        return keys, binary_from(np.empty(0, np.uint8), np.zeros(n, np.int64))
    ops = np.asarray(batch.column("op").to_numpy(zero_copy_only=False))
    erased = ops == CHANGE_ERASE
    live: Mask | None = ~erased if erased.any() else None
    cols = plan.row_cols
    vw = RowWriter(n)
    vw.constant(frame(plan.value_id))
    had: Mask | None = None
    if plan.diff or opts.envelope == S.ENVELOPE_ENRICHED:
        ox = np.asarray(batch.column("ox").fill_null(False).to_numpy(zero_copy_only=False))
        had = ox & (ops != CHANGE_SNAPSHOT)  # a previous row: an update (or the deleted row)
    hlc = _hlc_text(batch) if opts.updated or opts.mvcc_timestamp else None
    if opts.envelope in (S.ENVELOPE_WRAPPED, S.ENVELOPE_ENRICHED):
        if plan.diff:
            vw.branch(had)
            for c in S.row_columns(table, opts):
                write_field(vw, column(c, old=True), c, had)
        vw.branch(live)
        for c in cols:
            write_field(vw, column(c), c, live)
    if opts.envelope in (S.ENVELOPE_WRAPPED, S.ENVELOPE_BARE) and hlc is not None:
        for _ in range(int(opts.updated) + int(opts.mvcc_timestamp)):
            vw.union_binary(hlc)
    if opts.envelope == S.ENVELOPE_BARE:
        # the record is always there; a delete carries only the key columns (a query's outputs
        # are computed over that row already: its non-key columns read NULL)
        vw.constant(_SOME)
        for c in cols:
            write_field(vw, column(c), c, None, None if c.is_key or plan.projected else live)
    if opts.envelope == S.ENVELOPE_ENRICHED:
        assert had is not None
        src = plan.source
        if src is not None:
            vw.constant(src.head)
            if src.mvcc and hlc is not None:
                vw.union_binary(hlc)
            else:
                vw.constant(_NULL)
            vw.constant(src.middle)
            if src.updated and hlc is not None:
                vw.union_binary(hlc)
                vw.union_long(np.asarray(batch.column("ts").to_numpy(), np.int64), None)
            else:
                vw.constant(_NULL + _NULL)
        vw.union_long(_processed_ns(batch), None)  # ts_ns
        op = np.full((n, 3), VALUE_BRANCH, np.uint8)  # ["null", string]: branch, length 1, letter
        op[:, 2] = np.where(erased, ord("d"), np.where(had, ord("u"), ord("c")))
        vw.segment(op, None)
    return keys, vw.finish()


def _processed_ns(batch: pa.RecordBatch) -> Any:
    """``ts_ns`` of the enriched envelope: when the changefeed processed the events (the batch's
    ``pt`` column where the caller put one, as the Spark face does; else now)."""
    import numpy as np

    if "pt" in batch.schema.names:
        return np.asarray(batch.column("pt").to_numpy(), np.int64)
    return np.full(batch.num_rows, time.time_ns(), np.int64)


def encode_arrays(
    batch: pa.RecordBatch, plan: AvroPlan
) -> tuple[list[int], list[bytes], list[bytes], list[int]]:
    """Encode a batch of change rows: (partition, key, value, ts) columns as Python lists."""
    if batch.num_rows == 0:
        return [], [], [], []
    keys, values = encode_columns(batch, plan)
    key_list: list[bytes] = keys.to_pylist()
    partitions = [partition_of(k, plan.partitions) for k in key_list]
    return partitions, key_list, values.to_pylist(), batch.column("ts").to_pylist()


def input_columns(plan: AvroPlan) -> list[str]:
    """The change-row columns :func:`encode_arrays` reads under a plan."""
    table, opts = plan.table, plan.opts
    names = ["ts", "lg", "op", "ox"] + [c.db for c in table.key]
    if plan.value_schema is not None:
        names += [c.db for c in plan.row_cols if not c.is_key and not c.virtual and c.db not in names]
        if plan.diff:
            names += [f"o{c.id}" for c in S.row_columns(table, opts) if not c.is_key and not c.virtual]
        if opts.envelope == S.ENVELOPE_ENRICHED:
            names.append("pt")
    return names


def encode_arrow(batch: pa.RecordBatch, plan: AvroPlan) -> pa.RecordBatch:
    """:func:`encode_columns` as an Arrow batch of the encoder output shape (partition included)."""
    import pyarrow as pa

    keys, values = encode_columns(batch, plan)
    partitions = [partition_of(k, plan.partitions) for k in keys.to_pylist()]
    return pa.RecordBatch.from_arrays(
        [pa.array(partitions, pa.int32()), keys, values, batch.column("ts")],
        names=["partition", "key", "value", "ts"],
    )


def encode_kv(batch: pa.RecordBatch, plan: AvroPlan) -> pa.RecordBatch:
    """The Spark workers' half: key, value and ts (the partition is computed in the JVM)."""
    import pyarrow as pa

    keys, values = encode_columns(batch, plan)
    return pa.RecordBatch.from_arrays([keys, values, batch.column("ts")], names=["key", "value", "ts"])


KV_DDL = "key binary, value binary, ts long"


# ============================================================================ CDC queries


def query_columns(q: CdcQuery) -> tuple[ColumnSchema, ...]:
    """A CDC query's outputs as the row record's columns; CockroachDB's errors for the outputs
    Avro cannot carry (raised when the changefeed starts, before any message)."""
    cols = output_columns(q)
    for out, c in zip(q.columns, cols, strict=True):
        if out.expr.op == PREVROW:  # cdc_prev selected whole: a tuple (a RECORD) in CockroachDB
            raise UnsupportedFeature(f"column {c.name}: type RECORD not yet supported with avro")
        if c.type.kind is Kind.DECIMAL and not _keeps_decimal_type(out.expr):
            raise UnsupportedFeature(
                f"column {c.name}: decimal with no precision not yet supported with avro"
            )
        S.field_type(c)
    return cols


def _keeps_decimal_type(e: PExpr) -> bool:
    """Whether CockroachDB types a DECIMAL output with its precision: a column (or a column of
    ``cdc_prev``) keeps its column's type, a cast its target; every other DECIMAL expression
    (arithmetic, ``round``, ``abs``, ``crdb_internal_mvcc_timestamp``...) is a plain DECIMAL
    there, which Avro refuses (here such results carry a precision for Spark's decimals)."""
    return e.op in (COL, PREV) or (e.op == FN and e.value == "cast")


def _crdb_diff(feed: FeedSpec) -> bool:
    return feed.crdb is not None and feed.crdb.diff


# ============================================================================ the encoder


class CrdbAvroEncoder(Encoder):
    name = "crdb-avro"

    def __init__(self, resolver: SchemaResolver | None = None) -> None:
        self._resolver = resolver
        self._plans: dict[tuple[Any, ...], AvroPlan] = {}

    def resolver(self, opts: S.AvroOptions) -> SchemaResolver:
        if self._resolver is not None:
            return self._resolver
        from changefeed.exceptions import InvalidOption
        from changefeed.formats.schema_registry import client_for

        if not opts.registry:
            raise InvalidOption("WITH option confluent_schema_registry is required for format=avro")
        return client_for(opts.registry)

    def plan(self, table: TableSchema, feed: FeedSpec, opts: S.AvroOptions | None = None) -> AvroPlan:
        """Schemas and registry ids for a table version (registered on first use); with a CDC
        query (``feed.query``), for its projection."""
        opts = opts or S.AvroOptions.from_feed(feed)
        q = feed.query
        if q is None:
            S.check_table(table, opts)
            row_cols = S.row_columns(table, opts)
            diff = opts.diff
        else:
            row_cols = query_columns(q)
            diff = opts.diff or q.uses_prev
        diff = diff and opts.envelope in (S.ENVELOPE_WRAPPED, S.ENVELOPE_ENRICHED)
        if diff:
            S.check_table(table, opts)  # before: the whole previous row
        key = S.key_schema(table, opts)
        value = S.value_schema(table, opts, None if q is None else row_cols, diff=diff)
        # the schemas alone do not say which storage columns hold the values (a column dropped
        # and added again under its old name has a new id), so the table's version is in the key
        cache_key = (
            feed.topic,
            feed.partitions,
            opts,
            table.id,
            table.version,
            tuple(c.id for c in table.columns),
            S.schema_json(key),
            S.schema_json(value or {}),
        )
        cached = self._plans.get(cache_key)
        if cached is not None:
            return cached
        key_subject, value_subject = S.subjects(feed.topic, opts.prefix)
        resolver = self.resolver(opts)
        key_id = resolver.register(key_subject, S.schema_json(key))
        value_id = resolver.register(value_subject, S.schema_json(value)) if value is not None else 0
        source = (
            EnrichedSource.of(table, opts)
            if opts.envelope == S.ENVELOPE_ENRICHED and opts.enriched_source
            else None
        )
        plan = AvroPlan(
            table,
            opts,
            feed.partitions,
            key,
            key_id,
            value,
            value_id,
            row_cols=row_cols,
            projected=q is not None,
            diff=diff,
            source=source,
        )
        self._plans[cache_key] = plan
        return plan

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        plan = self.plan(table, feed)

        from pyspark.sql import functions as F

        if feed.query is not None:  # predicate and projection as Spark column expressions
            df = apply_spark(feed.query, df, table, diff=_crdb_diff(feed))
        if plan.opts.envelope == S.ENVELOPE_ENRICHED and "pt" not in df.columns:
            # ts_ns: the micro-batch's processing time, one value for all its rows
            df = df.withColumn("pt", F.unix_micros(F.current_timestamp()) * F.lit(1000))

        def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield encode_kv(b, plan)

        # only the columns the encoder reads cross to the Python workers; the partition is
        # pmod(xxhash64(key), n), which equals partition_of, computed by Spark's own function
        encoded = df.select(*input_columns(plan)).mapInArrow(encode, KV_DDL)
        partition = F.pmod(F.xxhash64(F.col("key")), F.lit(plan.partitions)).cast("int")
        return encoded.select(partition.alias("partition"), "key", "value", "ts")

    # ------------------------------------------------------------------ Python
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        plan = self.plan(table, feed)
        if feed.query is not None:
            batch = evaluate_batch(feed.query, batch, table, diff=_crdb_diff(feed))
        p, k, v, t = encode_arrays(batch, plan)
        return list(zip(p, k, v, t, strict=True))

    # ------------------------------------------------------------------ resolved
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        opts = S.AvroOptions.from_feed(feed)
        schema = S.resolved_schema(feed.topic, opts)
        _, value_subject = S.subjects(feed.topic, opts.prefix)
        sid = self.resolver(opts).register(value_subject, S.schema_json(schema))
        return frame(sid) + _writer(schema)({"resolved": ts.crdb()})


@register("crdb-avro")
def _factory() -> Encoder:
    return CrdbAvroEncoder()
