"""CockroachDB Avro changefeed records (format ``crdb-avro``) in the Confluent wire format.

Each message key and value is ``0x00`` + the 4-byte big-endian schema id + the Avro binary datum
(see :mod:`changefeed.formats.avro_schema` for the schemas). Keys are the key record
(``{"a": {"long": 0}}``); values depend on the envelope:

* ``wrapped`` (default): ``{"after": row | null}``, plus ``before`` with ``diff`` (the old row,
  null when the row did not exist before or for initial-scan rows), ``updated`` and
  ``mvcc_timestamp`` (CockroachDB's HLC decimal ``<wall ns>.<logical, 10 digits>``) when asked;
* ``bare``: ``{"record": row}``; a delete carries only the key columns;
* ``key_only``: the value is empty.

Schema ids come from a :class:`~changefeed.formats.schema_registry.SchemaResolver` injected into
the encoder (a caching registry client by default), asked once per schema on the driver, under the
subjects ``<prefix><topic>-key`` and ``-value``. A table whose schema changed gets new schemas, so
new versions are registered under the same subjects; every field is a nullable union with a null
default, so each version reads the others.

Encoding is column-wise conversion of Arrow columns to Avro values, then one fastavro
``schemaless_writer`` call per datum with the schema parsed once per batch plan. The Spark face
runs the same function over change-row Arrow batches with ``mapInArrow`` on the executors (Spark
has no Avro writer without the external spark-avro jar); the schemas and ids travel in the closure.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind, SqlType
from changefeed.formats import avro_schema as S
from changefeed.formats.base import Encoder, Record, partition_of, register

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
    return json.dumps(orjson.loads(stored), sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


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
# branch index (zig-zag varint) followed by the value. So each column is encoded on its own into a
# list of byte strings (one per row), and rows, keys and envelopes are joins of those lists. The
# common types are written here; the others (decimal, arrays, BIT) go through fastavro per value.

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


def _rows(field_cols: list[list[bytes]], n: int) -> list[bytes]:
    if not field_cols:
        return [b""] * n
    return list(map(b"".join, zip(*field_cols, strict=True)))


def encode_arrays(
    batch: pa.RecordBatch, plan: AvroPlan
) -> tuple[list[int], list[bytes], list[bytes], list[int]]:
    """Encode a batch of change rows: (partition, key, value, ts) columns."""
    n = batch.num_rows
    if n == 0:
        return [], [], [], []
    table, opts = plan.table, plan.opts
    key_cols = table.key
    converted: dict[str, list[Any]] = {}

    def values_of(c: ColumnSchema, old: bool = False) -> list[Any]:
        if c.virtual:  # virtual_columns='null'
            return [None] * n
        column = f"o{c.id}" if old and not c.is_key else c.db
        if column not in converted:
            converted[column] = column_values(batch.column(column), c.type)
        return converted[column]

    key_prefix = frame(plan.key_id)
    key_rows = _rows([field_bytes(values_of(c), S.field_type(c)) for c in key_cols], n)
    keys = [key_prefix + k for k in key_rows]
    ts: list[int] = batch.column("ts").to_pylist()
    partitions = [partition_of(k, plan.partitions) for k in keys]
    if plan.value_schema is None:  # key_only
        return partitions, keys, [b""] * n, ts
    ops: list[int] = batch.column("op").to_pylist()
    erased = [op == CHANGE_ERASE for op in ops]
    cols = S.row_columns(table, opts)
    parts: list[list[bytes]] = []
    if opts.envelope == S.ENVELOPE_BARE:
        # a delete's record carries only the key columns
        fields = []
        for c in cols:
            vals = values_of(c)
            if not c.is_key:
                vals = [None if e else v for v, e in zip(vals, erased, strict=True)]
            fields.append(field_bytes(vals, S.field_type(c)))
        parts.append([_SOME + r for r in _rows(fields, n)])
    else:
        if opts.diff:
            oxs: list[bool] = batch.column("ox").to_pylist()
            old = _rows(
                [field_bytes(values_of(c, old=True), S.field_type(c)) for c in cols],
                n,
            )
            parts.append(
                [
                    _SOME + r if ox and op != CHANGE_SNAPSHOT else _NULL
                    for r, ox, op in zip(old, oxs, ops, strict=True)
                ]
            )
        new = _rows([field_bytes(values_of(c), S.field_type(c)) for c in cols], n)
        parts.append([_NULL if e else _SOME + r for r, e in zip(new, erased, strict=True)])
    if opts.updated or opts.mvcc_timestamp:
        lgs: list[int] = batch.column("lg").to_pylist()
        hlc = [_text(f"{w}.{lg:010d}") for w, lg in zip(ts, lgs, strict=True)]
        if opts.updated:
            parts.append(hlc)
        if opts.mvcc_timestamp:
            parts.append(hlc)
    value_prefix = frame(plan.value_id)
    values = [value_prefix + v for v in _rows(parts, n)]
    return partitions, keys, values, ts


def input_columns(plan: AvroPlan) -> list[str]:
    """The change-row columns :func:`encode_arrays` reads under a plan."""
    table, opts = plan.table, plan.opts
    names = ["ts", "lg", "op", "ox"] + [c.db for c in table.key]
    if plan.value_schema is not None:
        cols = S.row_columns(table, opts)
        names += [c.db for c in cols if not c.is_key and not c.virtual]
        if opts.diff and opts.envelope == S.ENVELOPE_WRAPPED:
            names += [f"o{c.id}" for c in cols if not c.is_key and not c.virtual]
    return names


def encode_arrow(batch: pa.RecordBatch, plan: AvroPlan) -> pa.RecordBatch:
    """:func:`encode_arrays` as an Arrow batch of the encoder output shape."""
    import pyarrow as pa

    p, k, v, t = encode_arrays(batch, plan)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(p, pa.int32()),
            pa.array(k, pa.binary()),
            pa.array(v, pa.binary()),
            pa.array(t, pa.int64()),
        ],
        names=["partition", "key", "value", "ts"],
    )


OUTPUT_DDL = "partition int, key binary, value binary, ts long"


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
        """Schemas and registry ids for a table version (registered on first use)."""
        opts = opts or S.AvroOptions.from_feed(feed)
        S.check_table(table, opts)
        key = S.key_schema(table, opts)
        value = S.value_schema(table, opts)
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
        plan = AvroPlan(table, opts, feed.partitions, key, key_id, value, value_id)
        self._plans[cache_key] = plan
        return plan

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        plan = self.plan(table, feed)

        def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield encode_arrow(b, plan)

        # only the columns the encoder reads cross to the Python workers
        return df.select(*input_columns(plan)).mapInArrow(encode, OUTPUT_DDL)

    # ------------------------------------------------------------------ Python
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        p, k, v, t = encode_arrays(batch, self.plan(table, feed))
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
