"""CockroachDB Avro schemas: a table's key, row and envelope records, names and type mapping.

What CockroachDB's ``avro.go`` publishes, rebuilt from a :class:`TableSchema`:

* every field is a nullable union ``["null", T]`` with ``"default": null`` (even NOT NULL and key
  columns), and carries the column's SQL definition in ``"__crdb__"`` (``"a INT8 NOT NULL"``);
* field order is column order (key: primary-key columns in key order);
* schema JSON is compact, record members in the order ``type, name, fields, namespace``,
  field members ``type, name, default, __crdb__``;
* names: :func:`avro_name` escapes everything outside ``[A-Za-z0-9_]`` (and a leading digit) as
  ``_uXXXX_``; the row record is named after the table, with ``avro_schema_prefix`` as its
  namespace; the key record after prefix + table; the envelope after prefix + table + ``_envelope``.

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
AVRO_ENVELOPES = (ENVELOPE_WRAPPED, ENVELOPE_BARE, ENVELOPE_KEY_ONLY)

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


def _column_fields(cols: tuple[ColumnSchema, ...]) -> list[dict[str, Any]]:
    return [
        {"type": field_type(c), "name": avro_name(c.name), "default": None, "__crdb__": column_definition(c)}
        for c in cols
    ]


def table_name(table: TableSchema) -> str:
    return table.short_name


def row_columns(table: TableSchema, opts: AvroOptions) -> tuple[ColumnSchema, ...]:
    """The columns of a row record, in table order: every stored column, and the virtual computed
    columns too with ``virtual_columns='null'`` (always null)."""
    return tuple(c for c in table.columns if not c.virtual or opts.virtual_null)


def row_schema(table: TableSchema, opts: AvroOptions, *, suffix: str = "") -> dict[str, Any]:
    return _record(
        avro_name(table_name(table)) + suffix, _column_fields(row_columns(table, opts)), opts.prefix
    )


def key_schema(table: TableSchema, opts: AvroOptions) -> dict[str, Any]:
    return _record(avro_name(opts.prefix + table_name(table)), _column_fields(table.key), opts.prefix)


def _nullable(name: str, t: Any) -> dict[str, Any]:
    return {"type": ["null", t], "name": name, "default": None}


def value_schema(table: TableSchema, opts: AvroOptions) -> dict[str, Any] | None:
    """The envelope record of the value, or None for ``key_only`` (values are empty)."""
    if opts.envelope == ENVELOPE_KEY_ONLY:
        return None
    after = row_schema(table, opts)
    fields: list[dict[str, Any]] = []
    if opts.envelope == ENVELOPE_BARE:
        fields.append(_nullable("record", after))
    else:
        if opts.diff:
            fields.append(_nullable("before", row_schema(table, opts, suffix="_before")))
        fields.append(_nullable("after", after))
    if opts.updated:
        fields.append(_nullable("updated", "string"))
    if opts.mvcc_timestamp:
        fields.append(_nullable("mvcc_timestamp", "string"))
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
    "ENVELOPE_KEY_ONLY",
    "ENVELOPE_ROW",
    "ENVELOPE_WRAPPED",
    "MAGIC",
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
    "subjects",
    "value_schema",
]
