"""CockroachDB Avro schemas: a table's key, row and envelope records, names and type mapping.

What CockroachDB's ``avro.go`` publishes, rebuilt from a :class:`TableSchema`:

* every field is a nullable union ``["null", T]`` with ``"default": null`` (even NOT NULL and key
  columns), and carries the column's SQL definition in ``"__crdb__"`` (``"a INT8 NOT NULL"``);
* field order is column order (key: primary-key columns in key order);
* schema JSON is compact, record members in the order ``type, name, fields, namespace``,
  field members ``type, name, default, __crdb__``;
* names: :func:`avro_name` escapes everything outside ``[A-Za-z0-9_]`` (and a leading digit) as
  ``_uXXXX_``; the row record is named after the table, with ``avro_schema_prefix`` as its
  namespace; the key record after prefix + table; the envelope after prefix + table + ``_envelope``;
* a CDC query's row record holds its outputs (fields without ``__crdb__``, as CockroachDB's
  projection keeps no SQL definition); the enriched envelope adds the ``source`` record (named
  ``source``, namespace the prefix), ``ts_ns`` and ``op``.

Type mapping (inside the union): BOOL ``boolean``; INT2/4/8 ``long``; FLOAT4/8 ``double``; STRING,
UUID, INET, INTERVAL (ISO 8601), JSONB, ENUM ``string``; BYTES ``bytes``; DATE ``int``/``date``;
TIME ``long``/``time-micros``; TIMESTAMP, TIMESTAMPTZ ``long``/``timestamp-micros``; DECIMAL(p,s)
the union ``["null", bytes/decimal(p,s), "string"]`` (the string branch carries NaN/Infinity); BIT
and VARBIT ``array`` of ``long`` (bits used in the last word, then 64-bit words MSB first); T[]
``array`` of ``["null", T]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import InvalidOption, UnsupportedFeature
from changefeed.feeds.kafka_config import escape_rune, kafka_name

if TYPE_CHECKING:
    from changefeed.engine.catalog import ColumnSchema, TableSchema
    from changefeed.feeds.spec import FeedSpec

# ---------------------------------------------------------------------------- envelopes
ENVELOPE_WRAPPED = "wrapped"
ENVELOPE_BARE = "bare"
ENVELOPE_KEY_ONLY = "key_only"
ENVELOPE_ROW = "row"
ENVELOPE_ENRICHED = "enriched"
AVRO_ENVELOPES = (ENVELOPE_WRAPPED, ENVELOPE_BARE, ENVELOPE_KEY_ONLY, ENVELOPE_ENRICHED)

#: Confluent wire format: magic byte, then the 4-byte big-endian schema id.
MAGIC = b"\x00"


@dataclass(frozen=True, slots=True)
class AvroOptions:
    """The CockroachDB changefeed options the Avro encoder reads."""

    envelope: str = ENVELOPE_WRAPPED
    updated: bool = False
    diff: bool = False
    mvcc_timestamp: bool = False
    prefix: str = ""  # avro_schema_prefix
    registry: str = ""  # confluent_schema_registry
    virtual_null: bool = False  # virtual_columns='null': virtual computed columns as null fields
    #: envelope=enriched: the ``source`` record (enriched_properties=source) and what it says
    #: of the changefeed (its sink kind, job id and the database's cluster id)
    enriched_source: bool = False
    sink_kind: str = ""
    job_id: int = 0
    cluster_id: str = ""

    def __post_init__(self) -> None:
        if self.envelope == ENVELOPE_ROW:
            raise InvalidOption("envelope=row is not supported with format=avro")
        if self.envelope not in AVRO_ENVELOPES:
            raise InvalidOption(f"unknown envelope: {self.envelope}")

    @staticmethod
    def from_feed(feed: FeedSpec) -> AvroOptions:
        """The options of a CockroachDB feed (``feed.crdb``); defaults for any other feed."""
        crdb = feed.crdb
        if crdb is None:
            return AvroOptions()
        return AvroOptions(
            envelope=crdb.envelope.lower(),
            updated=crdb.updated,
            diff=crdb.diff,
            mvcc_timestamp=crdb.mvcc_timestamp,
            prefix=crdb.avro_schema_prefix,
            registry=crdb.confluent_schema_registry or "",
            virtual_null=crdb.virtual_columns.lower() == "null",
            enriched_source=crdb.enriched and crdb.enriched_source,
            sink_kind=crdb.sink_kind if crdb.enriched else "",
            job_id=crdb.job_id if crdb.enriched else 0,
            cluster_id=crdb.cluster_id if crdb.enriched else "",
        )


# ---------------------------------------------------------------------------- names
_AVRO_OK = re.compile(r"[A-Za-z0-9_]")


def avro_name(sql_name: str) -> str:
    """CockroachDB's SQLNameToAvroName: ``☃`` -> ``_u2603_``, ``.`` -> ``_u002e_``."""
    out = []
    for i, r in enumerate(sql_name):
        if _AVRO_OK.fullmatch(r) and not (i == 0 and r.isdigit()):
            out.append(r)
        else:
            out.append(escape_rune(r))
    return "".join(out)


def subjects(topic: str, prefix: str = "") -> tuple[str, str]:
    """The registry subjects ``<topic>-key`` and ``<topic>-value`` of a topic."""
    base = kafka_name(prefix + topic)
    return f"{base}-key", f"{base}-value"


# ---------------------------------------------------------------------------- SQL definitions
#: CockroachDB's bare identifiers: lower-case ASCII letters, ``_`` and any non-ASCII character
#: start one; digits and ``$`` may follow.
_PLAIN_IDENT = re.compile(r"[a-z_\u0080-\U0010ffff][a-z0-9_$\u0080-\U0010ffff]*")


def sql_ident(name: str) -> str:
    if _PLAIN_IDENT.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def column_definition(col: ColumnSchema) -> str:
    """The column as CockroachDB writes it in ``__crdb__``: ``a INT8 NOT NULL``."""
    text = f"{sql_ident(col.name)} {col.type.name}"
    if col.not_null or col.is_key:
        text += " NOT NULL"
    return text


# ---------------------------------------------------------------------------- types
DECIMAL_STRING_BRANCH = "string"


def _unsupported(col: str, t: SqlType) -> UnsupportedFeature:
    return UnsupportedFeature(f"column {col}: type {t.name} not yet supported with avro")


def element_type(col: str, t: SqlType) -> Any:
    """The Avro type (the non-null branch) of values of ``t``."""
    k = t.kind
    if k is Kind.BOOL:
        return "boolean"
    if k is Kind.INT or (k is Kind.UINT and t.bits < 64):
        return "long"
    if k is Kind.FLOAT:
        return "double"
    if k in (Kind.TEXT, Kind.UUID, Kind.TIMEUUID, Kind.INET, Kind.INTERVAL, Kind.JSON, Kind.ENUM):
        return "string"
    if k is Kind.BYTES:
        return "bytes"
    if k is Kind.DATE:
        return {"type": "int", "logicalType": "date"}
    if k is Kind.TIME:
        return {"type": "long", "logicalType": "time-micros"}
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if k is Kind.DECIMAL:
        if t.precision is None:
            raise UnsupportedFeature(f"column {col}: decimal with no precision not yet supported with avro")
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale or 0}
    if k is Kind.BIT:
        return {"type": "array", "items": "long"}
    if k is Kind.ARRAY:
        assert t.element is not None
        if t.element.kind in (Kind.ARRAY, Kind.DECIMAL):
            raise _unsupported(col, t)
        return {"type": "array", "items": ["null", element_type(col, t.element)]}
    raise _unsupported(col, t)


def field_type(col: ColumnSchema) -> list[Any]:
    """The union of a column's field: ``["null", T]`` (DECIMAL: plus ``"string"``)."""
    inner = element_type(col.name, col.type)
    if col.type.kind is Kind.DECIMAL:
        return ["null", inner, DECIMAL_STRING_BRANCH]
    return ["null", inner]


def _record(name: str, fields: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
    if namespace:
        rec["namespace"] = namespace
    return rec


def _column_fields(cols: tuple[ColumnSchema, ...], *, sql: bool = True) -> list[dict[str, Any]]:
    """The fields of ``cols``; ``sql=False`` leaves ``__crdb__`` out (a CDC query's projection:
    CockroachDB keeps no SQL definition for a computed output, and omits the empty member)."""
    out = []
    for c in cols:
        f: dict[str, Any] = {"type": field_type(c), "name": avro_name(c.name), "default": None}
        if sql:
            f["__crdb__"] = column_definition(c)
        out.append(f)
    return out


def table_name(table: TableSchema) -> str:
    return table.short_name


def row_columns(table: TableSchema, opts: AvroOptions) -> tuple[ColumnSchema, ...]:
    """The columns of a row record, in table order: every stored column, and the virtual computed
    columns too with ``virtual_columns='null'`` (always null)."""
    return tuple(c for c in table.columns if not c.virtual or opts.virtual_null)


def row_schema(
    table: TableSchema,
    opts: AvroOptions,
    *,
    suffix: str = "",
    projection: tuple[ColumnSchema, ...] | None = None,
) -> dict[str, Any]:
    """The row record, named after the table (``suffix`` appended, e.g. ``_before``); with
    ``projection`` (a CDC query's outputs) the record holds those instead of the table's columns."""
    fields = (
        _column_fields(row_columns(table, opts))
        if projection is None
        else _column_fields(projection, sql=False)
    )
    return _record(avro_name(table_name(table)) + suffix, fields, opts.prefix)


def key_schema(table: TableSchema, opts: AvroOptions) -> dict[str, Any]:
    return _record(avro_name(opts.prefix + table_name(table)), _column_fields(table.key), opts.prefix)


def _nullable(name: str, t: Any) -> dict[str, Any]:
    return {"type": ["null", t], "name": name, "default": None}


# ---------------------------------------------------------------------------- enriched: source
SOURCE_RECORD = "source"
#: The ``source`` record's fields (enriched_properties=source): name and Avro type, each inside
#: ``["null", T]``. CockroachDB builds the list from a Go map, so its order changes from one run
#: to the next; here it is alphabetical (as the JSON encoder's Kafka Connect schema).
SOURCE_FIELDS: tuple[tuple[str, Any], ...] = (
    ("changefeed_sink", "string"),
    ("cluster_id", "string"),
    ("cluster_name", "string"),
    ("database_name", "string"),
    ("db_version", "string"),
    ("job_id", "string"),
    ("mvcc_timestamp", "string"),  # mvcc_timestamp option, else null
    ("node_id", "string"),
    ("node_name", "string"),
    ("origin", "string"),
    ("primary_keys", {"type": "array", "items": "string"}),
    ("schema_name", "string"),
    ("source_node_locality", "string"),
    ("table_name", "string"),
    ("ts_hlc", "string"),  # updated option, else null
    ("ts_ns", "long"),  # updated option, else null
)


def source_schema(opts: AvroOptions) -> dict[str, Any]:
    return _record(SOURCE_RECORD, [_nullable(n, t) for n, t in SOURCE_FIELDS], opts.prefix)


# ---------------------------------------------------------------------------- the value envelope
def value_schema(
    table: TableSchema,
    opts: AvroOptions,
    projection: tuple[ColumnSchema, ...] | None = None,
    *,
    diff: bool | None = None,
) -> dict[str, Any] | None:
    """The envelope record of the value, or None for ``key_only`` (values are empty).

    Fields in CockroachDB's order: ``before`` (diff; the whole previous row, also with a CDC
    query), ``after`` (wrapped, enriched), ``updated``, ``mvcc_timestamp`` (wrapped, bare),
    ``record`` (bare), ``source`` (enriched with enriched_properties=source), ``ts_ns``, ``op``
    (enriched). ``projection`` is a CDC query's outputs (the row record then holds them);
    ``diff`` overrides ``opts.diff`` (a query reading ``cdc_prev`` turns it on)."""
    if opts.envelope == ENVELOPE_KEY_ONLY:
        return None
    with_before = opts.diff if diff is None else diff
    row = row_schema(table, opts, projection=projection)
    fields: list[dict[str, Any]] = []
    if opts.envelope in (ENVELOPE_WRAPPED, ENVELOPE_ENRICHED):
        if with_before:
            fields.append(_nullable("before", row_schema(table, opts, suffix="_before")))
        fields.append(_nullable("after", row))
    if opts.envelope in (ENVELOPE_WRAPPED, ENVELOPE_BARE):
        if opts.updated:
            fields.append(_nullable("updated", "string"))
        if opts.mvcc_timestamp:
            fields.append(_nullable("mvcc_timestamp", "string"))
    if opts.envelope == ENVELOPE_BARE:
        fields.append(_nullable("record", row))
    if opts.envelope == ENVELOPE_ENRICHED:
        if opts.enriched_source:
            if row["name"] == SOURCE_RECORD:
                raise UnsupportedFeature(
                    f"table {table_name(table)}: its Avro record name collides with the enriched "
                    "envelope's source record; rename the table or leave out enriched_properties=source"
                )
            fields.append(_nullable("source", source_schema(opts)))
        fields.append(_nullable("ts_ns", "long"))
        fields.append(_nullable("op", "string"))
    return _record(avro_name(opts.prefix + table_name(table)) + "_envelope", fields, opts.prefix)


def resolved_schema(topic: str, opts: AvroOptions) -> dict[str, Any]:
    """The schema of resolved-timestamp messages on a topic: only ``resolved``."""
    return _record(
        avro_name(opts.prefix + topic) + "_envelope", [_nullable("resolved", "string")], opts.prefix
    )


def schema_json(schema: dict[str, Any]) -> str:
    """Compact schema JSON as CockroachDB registers it."""
    return orjson.dumps(schema).decode()


def check_table(table: TableSchema, opts: AvroOptions | None = None) -> None:
    """Raise the CockroachDB error for the first column Avro cannot carry."""
    for c in row_columns(table, opts or AvroOptions()):
        field_type(c)


__all__ = [
    "AVRO_ENVELOPES",
    "ENVELOPE_BARE",
    "ENVELOPE_ENRICHED",
    "ENVELOPE_KEY_ONLY",
    "ENVELOPE_ROW",
    "ENVELOPE_WRAPPED",
    "MAGIC",
    "SOURCE_FIELDS",
    "AvroOptions",
    "avro_name",
    "check_table",
    "column_definition",
    "field_type",
    "kafka_name",
    "key_schema",
    "resolved_schema",
    "row_schema",
    "schema_json",
    "source_schema",
    "subjects",
    "value_schema",
]
