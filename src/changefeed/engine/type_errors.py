"""What each system says when a value does not fit a type, in its own words, and how values are
shown in messages (as SQL text, never as Python reprs).

A type's *voice* is the system that declared it: ``crdb`` (CockroachDB names such as ``INT8``,
``STRING``, ``TIMESTAMPTZ``, enums), ``ydb`` (YDB's ``Uint64``, ``Utf8``...) or ``cql``
(ScyllaDB's ``int``, ``text``...). The texts follow those systems' sources:

* CockroachDB (``tree.MakeParseError``, ``pgdate``): ``could not parse "x" as type int:
  strconv.ParseInt: parsing "x": invalid syntax`` (22P02), ``parsing as type date: could not
  parse "x"`` (22007), ``value type decimal doesn't match type int of column "v"`` (42804),
  ``integer out of range for type int2`` (22003), ``unsupported binary operator: <int> + <string>``;
* YDB (YQL's data literal check): ``Bad atom format for type: Uint64, value: "x"``, and for a
  value of another type ``Failed to convert 'id': Utf8 to Optional<Uint64>``;
* ScyllaDB (Cassandra's ``Constants``): ``Invalid STRING constant (x) for "v" of type int``.

This module knows types only by kind (``Kind.value``), name and voice, so that
:mod:`changefeed.engine.types` can use it without a cycle.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from changefeed.engine.intervals import Interval
from changefeed.exceptions import (
    DatatypeMismatch,
    InvalidDatetimeFormat,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    TypeMismatch,
)

#: YDB's own spellings of its primitive types (a type declared so speaks as YDB).
YDB_SPELLINGS = frozenset(
    [
        "Bool", "Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16", "Uint32", "Uint64", "Float",
        "Double", "String", "Utf8", "Date", "Datetime", "Timestamp", "Interval", "Json", "JsonDocument",
        "Uuid", "Decimal",
    ]
)  # fmt: skip

#: CockroachDB's names of its types in messages (``types.T.String()``), by our display name.
_CRDB_NAMES = {
    "INT8": "int", "INT4": "int4", "INT2": "int2", "STRING": "string", "BOOL": "bool",
    "FLOAT8": "float", "FLOAT4": "float4", "DECIMAL": "decimal", "BYTES": "bytes", "DATE": "date",
    "TIME": "time", "TIMESTAMP": "timestamp", "TIMESTAMPTZ": "timestamptz", "INTERVAL": "interval",
    "UUID": "uuid", "INET": "inet", "JSONB": "jsonb", "VARBIT": "varbit",
}  # fmt: skip


def voice_of(kind: str, name: str) -> str:
    """``crdb``, ``ydb`` or ``cql``: whose words a type's errors use."""
    base = name[:-2] if name.endswith("[]") else name
    if kind == "enum":
        return "crdb"
    if base in YDB_SPELLINGS or base.startswith("Decimal("):
        return "ydb"
    if base == base.lower():
        return "cql"
    return "crdb"


def crdb_name(name: str) -> str:
    """``INT8`` -> ``int``, ``DECIMAL(10,2)`` -> ``decimal(10,2)``, ``STRING[]`` -> ``string[]``."""
    if name.endswith("[]"):
        return crdb_name(name[:-2]) + "[]"
    return _CRDB_NAMES.get(name, name.lower() if name.isupper() or "(" in name else name)


# ----------------------------------------------------------------------------- showing values
def value_type(value: object) -> str:
    """CockroachDB's name of a value's type: ``int``, ``decimal``, ``string``, ``timestamptz``..."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes"
    if isinstance(value, dt.datetime):
        return "timestamp" if value.tzinfo is None else "timestamptz"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, dt.time):
        return "time"
    if isinstance(value, dt.timedelta | Interval):
        return "interval"
    if isinstance(value, uuid.UUID):
        return "uuid"
    if isinstance(value, list | tuple):
        inner = next((value_type(x) for x in value if x is not None), "unknown")
        return f"{inner}[]" if isinstance(value, list) else "tuple"
    if isinstance(value, dict):
        return "jsonb"
    return type(value).__name__.lower()


def ydb_value_type(value: object) -> str:
    """YQL's name of a literal's type: ``Int32``, ``Double``, ``Utf8``, ``Timestamp``..."""
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, int):
        return "Int32" if -(2**31) <= value < 2**31 else "Int64"
    if isinstance(value, float | Decimal):
        return "Double"
    if isinstance(value, str):
        return "Utf8"
    if isinstance(value, bytes):
        return "String"
    if isinstance(value, dt.datetime):
        return "Timestamp"
    if isinstance(value, dt.date):
        return "Date"
    if isinstance(value, dt.timedelta):
        return "Interval"
    if isinstance(value, uuid.UUID):
        return "Uuid"
    return value_type(value)


def iso_duration(td: dt.timedelta) -> str:
    """ISO 8601 duration, as YDB prints intervals: ``P31D``, ``PT1S``, ``P1DT2H30M0.5S``."""
    us = td // dt.timedelta(microseconds=1)
    sign = "-" if us < 0 else ""
    us = abs(us)
    days, rest = divmod(us, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, micros = divmod(rest, 1_000_000)
    out = f"{sign}P" + (f"{days}D" if days else "")
    clock = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if seconds or micros:
        clock += f"{seconds}.{micros:06d}".rstrip("0") + "S" if micros else f"{seconds}S"
    if clock:
        out += "T" + clock
    return out if out not in ("P", "-P") else "PT0S"


def sql_text(value: object) -> str:
    """A value as SQL literal text for messages: ``'it''s'``, ``1.5``, ``'2026-11-26'``,
    ``'\\x00ff'``, ``true``, ``NULL``, ``ARRAY[1,2]``."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return "'" + shown.replace("'", "''") + "'"
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return "'\\x" + raw[:30].hex() + ("..." if len(raw) > 30 else "") + "'"
    if isinstance(value, dt.datetime):
        return "'" + value.isoformat(sep=" ") + "'"
    if isinstance(value, dt.date | dt.time | uuid.UUID):
        return f"'{value}'"
    if isinstance(value, dt.timedelta):
        return f"'{iso_duration(value)}'"
    if isinstance(value, list | tuple):
        inner = ", ".join(sql_text(x) for x in value[:10]) + (", ..." if len(value) > 10 else "")
        return f"ARRAY[{inner}]" if isinstance(value, list) else f"({inner})"
    return str(value)


# ---------------------------------------------------------------------------------- mismatch
def _column(what: str) -> str | None:
    return what[len("column ") :] if what.startswith("column ") else None


def mismatch(kind: str, name: str, value: object, what: str, reason: str = "") -> TypeMismatch:
    """The error for ``value`` that does not fit type ``name`` (of kind ``kind``), where ``what``
    says where (``column v``, ``CAST``, ``Uint64()``); ``reason`` is a detail in our own words."""
    voice = voice_of(kind, name)
    column = _column(what)
    if voice == "ydb":
        if isinstance(value, str):
            return InvalidTextRepresentation(f'Bad atom format for type: {name}, value: "{value}"')
        if column is not None:
            return DatatypeMismatch(
                f"Failed to convert '{column}': {ydb_value_type(value)} to Optional<{name}>"
            )
        return DatatypeMismatch(f"Failed to convert type: {ydb_value_type(value)} to {name}")
    if voice == "cql":
        constant = _cql_constant(value)
        where = f'"{column}"' if column is not None else what
        return DatatypeMismatch(
            f"Invalid {constant} constant ({_cql_text(value)}) for {where} of type {name}"
        )
    tn = crdb_name(name)
    if isinstance(value, str):
        return crdb_parse_error(kind, tn, value, reason)
    where = f' of column "{column}"' if column is not None else ""
    return DatatypeMismatch(f"value type {value_type(value)} doesn't match type {tn}{where}")


def crdb_parse_error(kind: str, type_name: str, text: str, reason: str = "") -> TypeMismatch:
    """CockroachDB's error for a string that does not parse as ``type_name``."""
    if kind in ("date", "timestamp", "datetime", "time"):
        shown = "date" if kind == "date" else "time" if kind == "time" else type_name
        return InvalidDatetimeFormat(f'parsing as type {shown}: could not parse "{text}"')
    if kind in ("int", "uint", "varint"):
        detail = f'strconv.ParseInt: parsing "{text}": {reason or "invalid syntax"}'
    elif kind == "float":
        detail = f'strconv.ParseFloat: parsing "{text}": {reason or "invalid syntax"}'
    elif kind == "bool":
        detail = "invalid bool value"
    elif kind == "uuid":
        detail = reason or f"uuid: incorrect UUID format: {text}"
    elif kind == "enum":
        return InvalidTextRepresentation(f'invalid input value for enum {type_name}: "{text}"')
    elif kind == "bit":
        return InvalidTextRepresentation(
            f'could not parse string as bit array: "{text}" is not a valid binary digit'
        )
    else:
        detail = reason
    message = f'could not parse "{text}" as type {type_name}' + (f": {detail}" if detail else "")
    if kind == "interval":  # a date/time format, as PostgreSQL's interval_in says (22007)
        return InvalidDatetimeFormat(message)
    return InvalidTextRepresentation(message)


def out_of_range(kind: str, name: str, value: object, bounds: str) -> TypeMismatch:
    """An integer or decimal too large for its type."""
    voice = voice_of(kind, name)
    if voice == "crdb":
        what = "integer" if kind in ("int", "uint") else "value"
        return NumericValueOutOfRange(f"{what} out of range for type {crdb_name(name)}")
    if voice == "cql":
        return NumericValueOutOfRange(f"Unable to make {name} from '{value}': out of range ({bounds})")
    return NumericValueOutOfRange(f"Value {value} is out of range for {name} ({bounds})")


def _cql_constant(value: object) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INTEGER"
    if isinstance(value, float | Decimal):
        return "FLOAT"
    if isinstance(value, bytes):
        return "HEX"
    if isinstance(value, uuid.UUID):
        return "UUID"
    if isinstance(value, dt.timedelta):
        return "DURATION"
    return "STRING"


def _cql_text(value: object) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.timedelta):
        return iso_duration(value)
    return str(value)
