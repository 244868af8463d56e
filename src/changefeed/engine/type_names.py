"""Type names as each dialect declares them, resolved to :class:`~changefeed.engine.types.SqlType`:
YDB's (``Utf8``, ``Int64``, ``Decimal(22,9)``), ScyllaDB's CQL (``text``, ``bigint``,
``timeuuid``) and CockroachDB's / PostgreSQL's (``STRING``, ``INT8``, ``TIMESTAMPTZ``,
``VARCHAR(n)``, ``BIT(n)``, enums), in the shared ``sql`` dialect by their spelling."""

from __future__ import annotations

from typing import Any

from changefeed.engine.type_errors import YDB_SPELLINGS
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import TypeMismatch, UndefinedType

__all__ = ["resolve_type"]

_YDB_SPELLINGS = YDB_SPELLINGS


def _t(kind: Kind, name: str, **kw: Any) -> SqlType:
    return SqlType(kind=kind, name=name, **kw)


# Plain (parameterless) names, keyed by lower-case spelling. The stored name keeps the dialect's
# customary spelling so that error messages and DESCRIBE speak the user's language.
_SIMPLE: dict[str, SqlType] = {
    # --- YDB
    "bool": _t(Kind.BOOL, "Bool"),
    "int8": _t(Kind.INT, "Int8", bits=8),
    "int16": _t(Kind.INT, "Int16", bits=16),
    "int32": _t(Kind.INT, "Int32", bits=32),
    "int64": _t(Kind.INT, "Int64", bits=64),
    "uint8": _t(Kind.UINT, "Uint8", bits=8),
    "uint16": _t(Kind.UINT, "Uint16", bits=16),
    "uint32": _t(Kind.UINT, "Uint32", bits=32),
    "uint64": _t(Kind.UINT, "Uint64", bits=64),
    "float": _t(Kind.FLOAT, "Float", bits=32),
    "double": _t(Kind.FLOAT, "Double", bits=64),
    "string": _t(Kind.BYTES, "String"),
    "utf8": _t(Kind.TEXT, "Utf8"),
    "date": _t(Kind.DATE, "Date"),
    "datetime": _t(Kind.DATETIME, "Datetime"),
    "timestamp": _t(Kind.TIMESTAMP, "Timestamp"),
    "interval": _t(Kind.INTERVAL, "Interval"),
    "json": _t(Kind.JSON, "Json"),
    "jsondocument": _t(Kind.JSON, "JsonDocument"),
    "uuid": _t(Kind.UUID, "Uuid"),
}

_CQL: dict[str, SqlType] = {
    "int": _t(Kind.INT, "int", bits=32),
    "bigint": _t(Kind.INT, "bigint", bits=64),
    "smallint": _t(Kind.INT, "smallint", bits=16),
    "tinyint": _t(Kind.INT, "tinyint", bits=8),
    "counter": _t(Kind.INT, "counter", bits=64),
    "varint": _t(Kind.VARINT, "varint"),
    "text": _t(Kind.TEXT, "text"),
    "varchar": _t(Kind.TEXT, "varchar"),
    "ascii": _t(Kind.TEXT, "ascii", ascii=True),
    "boolean": _t(Kind.BOOL, "boolean"),
    "double": _t(Kind.FLOAT, "double", bits=64),
    "float": _t(Kind.FLOAT, "float", bits=32),
    "decimal": _t(Kind.DECIMAL, "decimal"),
    "timestamp": _t(Kind.TIMESTAMP, "timestamp", millis=True),
    "date": _t(Kind.DATE, "date"),
    "time": _t(Kind.TIME, "time"),
    "duration": _t(Kind.INTERVAL, "duration"),
    "uuid": _t(Kind.UUID, "uuid"),
    "timeuuid": _t(Kind.TIMEUUID, "timeuuid"),
    "blob": _t(Kind.BYTES, "blob"),
    "inet": _t(Kind.INET, "inet"),
}

_CRDB: dict[str, SqlType] = {
    "int": _t(Kind.INT, "INT8"),
    "integer": _t(Kind.INT, "INT8"),
    "int8": _t(Kind.INT, "INT8"),
    "int64": _t(Kind.INT, "INT8"),
    "bigint": _t(Kind.INT, "INT8"),
    "int4": _t(Kind.INT, "INT4", bits=32),
    "int2": _t(Kind.INT, "INT2", bits=16),
    "smallint": _t(Kind.INT, "INT2", bits=16),
    "serial": _t(Kind.INT, "INT8"),
    "string": _t(Kind.TEXT, "STRING"),
    "text": _t(Kind.TEXT, "STRING"),
    "varchar": _t(Kind.TEXT, "VARCHAR"),
    "char": _t(Kind.TEXT, "CHAR"),
    "character varying": _t(Kind.TEXT, "VARCHAR"),
    "bool": _t(Kind.BOOL, "BOOL"),
    "boolean": _t(Kind.BOOL, "BOOL"),
    "float": _t(Kind.FLOAT, "FLOAT8"),
    "float8": _t(Kind.FLOAT, "FLOAT8"),
    "double precision": _t(Kind.FLOAT, "FLOAT8"),
    "real": _t(Kind.FLOAT, "FLOAT4", bits=32),
    "float4": _t(Kind.FLOAT, "FLOAT4", bits=32),
    "decimal": _t(Kind.DECIMAL, "DECIMAL"),
    "numeric": _t(Kind.DECIMAL, "DECIMAL"),
    "dec": _t(Kind.DECIMAL, "DECIMAL"),
    "bytes": _t(Kind.BYTES, "BYTES"),
    "bytea": _t(Kind.BYTES, "BYTES"),
    "blob": _t(Kind.BYTES, "BYTES"),
    "date": _t(Kind.DATE, "DATE"),
    "time": _t(Kind.TIME, "TIME"),
    "timestamp": _t(Kind.TIMESTAMP, "TIMESTAMP", zoned=False),
    "timestamp without time zone": _t(Kind.TIMESTAMP, "TIMESTAMP", zoned=False),
    "timestamptz": _t(Kind.TIMESTAMP, "TIMESTAMPTZ"),
    "timestamp with time zone": _t(Kind.TIMESTAMP, "TIMESTAMPTZ"),
    "interval": _t(Kind.INTERVAL, "INTERVAL"),
    "uuid": _t(Kind.UUID, "UUID"),
    "inet": _t(Kind.INET, "INET"),
    "jsonb": _t(Kind.JSON, "JSONB"),
    "json": _t(Kind.JSON, "JSONB"),
    "bit": _t(Kind.BIT, "BIT(1)", length=1),
    "varbit": _t(Kind.BIT, "VARBIT", varying=True),
    "bit varying": _t(Kind.BIT, "VARBIT", varying=True),
}


def resolve_type(
    name: str,
    params: tuple[int, ...] = (),
    array: bool = False,
    *,
    dialect: str,
    enums: dict[str, tuple[str, ...]] | None = None,
) -> SqlType:
    """Resolve a declared type name. ``dialect`` is "cql" or "sql" (YDB and CockroachDB)."""
    base = _resolve_base(name, params, dialect, enums or {})
    if array:
        return SqlType(kind=Kind.ARRAY, name=f"{base.name}[]", element=base)
    return base


def _resolve_base(
    name: str, params: tuple[int, ...], dialect: str, enums: dict[str, tuple[str, ...]]
) -> SqlType:
    key = " ".join(name.lower().split())
    if key in ("decimal", "numeric", "dec"):
        if params:
            if (
                len(params) > 2
                or not 1 <= params[0] <= 38
                or (len(params) == 2 and not 0 <= params[1] <= params[0])
            ):
                raise TypeMismatch(f"invalid precision/scale for {name}{params}")
            p, s = params[0], params[1] if len(params) == 2 else 0
            shown = f"Decimal({p},{s})" if name == "Decimal" else f"{name.upper()}({p},{s})"
            return SqlType(kind=Kind.DECIMAL, name=shown, precision=p, scale=s)
        return (
            _t(Kind.DECIMAL, "Decimal(22,9)", precision=22, scale=9)
            if name == "Decimal"
            else (_CQL["decimal"] if dialect == "cql" else _CRDB["decimal"])
        )
    if key in ("bit", "varbit", "bit varying") and dialect != "cql":
        varying = key != "bit"
        n = params[0] if params else (None if varying else 1)
        if n is not None and n < 1:
            raise TypeMismatch(f"invalid length for {name}: {n}")
        shown = ("VARBIT" if varying else "BIT") + (f"({n})" if n is not None else "")
        return SqlType(kind=Kind.BIT, name=shown, length=n, varying=varying)
    if key in ("varchar", "char", "character varying", "character", "string") and params and dialect != "cql":
        return SqlType(kind=Kind.TEXT, name=f"{key.upper()}({params[0]})", length=params[0])
    if params:
        raise TypeMismatch(f"type {name} takes no parameters")
    if dialect == "cql":
        if key in _CQL:
            return _CQL[key]
        raise UndefinedType(f'type "{name}" does not exist')
    if name in _YDB_SPELLINGS or (key in _SIMPLE and key not in _CRDB):
        return _SIMPLE[key]
    if key in _CRDB:
        return _CRDB[key]
    if key in _SIMPLE:
        return _SIMPLE[key]
    if key in enums:
        return SqlType(kind=Kind.ENUM, name=name, labels=enums[key])
    raise UndefinedType(f'type "{name}" does not exist')
