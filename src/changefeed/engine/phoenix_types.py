"""Apache Phoenix column types, as the engine's :class:`~changefeed.engine.types.SqlType`.

A Phoenix table (one created with Phoenix DDL, see ``docs/phoenix.md``) declares its columns in
Phoenix's type names (``schema/types/P*.java``): ``INTEGER`` is 32 bits (not CockroachDB's
``INT8``), ``FLOAT`` is 32 bits, ``DATE`` and ``TIME`` are millisecond instants (``java.sql.Date``
and ``java.sql.Time``), ``TIMESTAMP`` is an instant with sub-millisecond precision, all zone-less
(GMT). Arrays are ``<type> ARRAY`` or ``<type>[]``. The stored ``name`` is Phoenix's spelling,
which is what the CDC JSON renderer (``changefeed.formats.phoenix_json``) keys on.
"""

from __future__ import annotations

from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import TypeMismatch, UndefinedObject

#: Phoenix's maximum DECIMAL precision.
MAX_DECIMAL_PRECISION = 38


def _t(kind: Kind, name: str, **kw: object) -> SqlType:
    return SqlType(kind=kind, name=name, **kw)  # type: ignore[arg-type]


_SIMPLE: dict[str, SqlType] = {
    "INTEGER": _t(Kind.INT, "INTEGER", bits=32),
    "BIGINT": _t(Kind.INT, "BIGINT", bits=64),
    "SMALLINT": _t(Kind.INT, "SMALLINT", bits=16),
    "TINYINT": _t(Kind.INT, "TINYINT", bits=8),
    # Phoenix's unsigned types hold the non-negative half of their signed twin.
    "UNSIGNED_INT": _t(Kind.UINT, "UNSIGNED_INT", bits=31),
    "UNSIGNED_LONG": _t(Kind.UINT, "UNSIGNED_LONG", bits=63),
    "UNSIGNED_SMALLINT": _t(Kind.UINT, "UNSIGNED_SMALLINT", bits=15),
    "UNSIGNED_TINYINT": _t(Kind.UINT, "UNSIGNED_TINYINT", bits=7),
    "FLOAT": _t(Kind.FLOAT, "FLOAT", bits=32),
    "UNSIGNED_FLOAT": _t(Kind.FLOAT, "UNSIGNED_FLOAT", bits=32),
    "DOUBLE": _t(Kind.FLOAT, "DOUBLE", bits=64),
    "UNSIGNED_DOUBLE": _t(Kind.FLOAT, "UNSIGNED_DOUBLE", bits=64),
    "DECIMAL": _t(Kind.DECIMAL, "DECIMAL"),
    "BOOLEAN": _t(Kind.BOOL, "BOOLEAN"),
    "VARCHAR": _t(Kind.TEXT, "VARCHAR"),
    "VARBINARY": _t(Kind.BYTES, "VARBINARY"),
    "VARBINARY_ENCODED": _t(Kind.BYTES, "VARBINARY_ENCODED"),
    "DATE": _t(Kind.TIMESTAMP, "DATE", zoned=False, millis=True),
    "UNSIGNED_DATE": _t(Kind.TIMESTAMP, "UNSIGNED_DATE", zoned=False, millis=True),
    "TIME": _t(Kind.TIMESTAMP, "TIME", zoned=False, millis=True),
    "UNSIGNED_TIME": _t(Kind.TIMESTAMP, "UNSIGNED_TIME", zoned=False, millis=True),
    "TIMESTAMP": _t(Kind.TIMESTAMP, "TIMESTAMP", zoned=False),
    "UNSIGNED_TIMESTAMP": _t(Kind.TIMESTAMP, "UNSIGNED_TIMESTAMP", zoned=False),
    "JSON": _t(Kind.JSON, "JSON"),
}

#: Type names no other dialect of the shared ``sql`` dialect has: one of them makes a CREATE
#: TABLE a Phoenix table.
PHOENIX_ONLY = frozenset(
    {
        "TINYINT",
        "UNSIGNED_INT",
        "UNSIGNED_LONG",
        "UNSIGNED_SMALLINT",
        "UNSIGNED_TINYINT",
        "UNSIGNED_FLOAT",
        "UNSIGNED_DOUBLE",
        "UNSIGNED_DATE",
        "UNSIGNED_TIME",
        "UNSIGNED_TIMESTAMP",
        "VARBINARY",
        "VARBINARY_ENCODED",
        "BINARY",
    }
)


def is_phoenix_only_type(name: str) -> bool:
    return name.upper() in PHOENIX_ONLY


def resolve_phoenix_type(name: str, params: tuple[int, ...] = (), array: bool = False) -> SqlType:
    """A Phoenix type as declared: ``INTEGER``, ``CHAR(5)``, ``DECIMAL(10,2)``, ``VARCHAR ARRAY``."""
    base = _base(name.upper(), params)
    if array:
        return SqlType(kind=Kind.ARRAY, name=f"{base.name} ARRAY", element=base)
    return base


def _base(key: str, params: tuple[int, ...]) -> SqlType:
    if key == "DECIMAL":
        if not params:
            return _SIMPLE["DECIMAL"]
        p = params[0]
        s = params[1] if len(params) > 1 else 0
        if len(params) > 2 or not 1 <= p <= MAX_DECIMAL_PRECISION or not 0 <= s <= p:
            raise TypeMismatch(f"invalid precision/scale for DECIMAL{params}")
        return SqlType(kind=Kind.DECIMAL, name=f"DECIMAL({p},{s})", precision=p, scale=s)
    if key in ("VARCHAR", "CHAR", "BINARY"):
        if key != "VARCHAR" and len(params) != 1:
            raise TypeMismatch(f"{key} needs a length: {key}(n)")
        if not params:
            return _SIMPLE["VARCHAR"]
        if len(params) != 1 or params[0] < 1:
            raise TypeMismatch(f"invalid length for {key}{params}")
        kind = Kind.BYTES if key == "BINARY" else Kind.TEXT
        return SqlType(kind=kind, name=f"{key}({params[0]})", length=params[0])
    if params:
        raise TypeMismatch(f"type {key} takes no parameters")
    t = _SIMPLE.get(key)
    if t is None:
        raise UndefinedObject(f"unknown Phoenix type {key!r}")
    return t


def is_char(t: SqlType) -> bool:
    """Phoenix ``CHAR(n)``: fixed width, rendered without its trailing pad spaces."""
    return t.name.startswith("CHAR(")


__all__ = ["PHOENIX_ONLY", "is_char", "is_phoenix_only_type", "resolve_phoenix_type"]
