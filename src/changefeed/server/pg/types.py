"""PostgreSQL type OIDs and the text and binary wire formats of the engine's Python values.

Results: each column gets the OID of its engine type (or, for expressions the engine leaves
untyped, of the first non-NULL value's Python type); values are encoded in the format the client
asked for. Parameters: decoded by the OID the client declared in Parse (0 = unspecified: the text
is passed on and the engine converts it to the column's type, as PostgreSQL's ``unknown`` does).
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_from_text, array_to_text
from changefeed.engine.intervals import Interval, fields as interval_fields, interval_of
from changefeed.engine.temporal_text import parse_interval_value
from changefeed.engine.type_errors import crdb_parse_error
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import (
    InvalidBinaryRepresentation,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    TypeMismatch,
)
from changefeed.server.pg.arrays import array_from_binary
from changefeed.sql.text_out import float_text, interval_text, time_text, timestamp_text

# ------------------------------------------------------------------------------------------ OIDs
BOOL = 16
BYTEA = 17
CHAR = 18
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
JSON = 114
FLOAT4 = 700
FLOAT8 = 701
UNKNOWN = 705
INET = 869
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIME = 1083
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
INTERVAL = 1186
BIT = 1560
VARBIT = 1562
NUMERIC = 1700
UUID = 2950
JSONB = 3802

#: name, OID, array OID, typlen, typcategory: what pg_type shows for the types we speak.
TYPES: tuple[tuple[str, int, int, int, str], ...] = (
    ("bool", BOOL, 1000, 1, "B"),
    ("bytea", BYTEA, 1001, -1, "U"),
    ("char", CHAR, 1002, 1, "S"),
    ("name", NAME, 1003, 64, "S"),
    ("int8", INT8, 1016, 8, "N"),
    ("int2", INT2, 1005, 2, "N"),
    ("int4", INT4, 1007, 4, "N"),
    ("text", TEXT, 1009, -1, "S"),
    ("oid", OID, 1028, 4, "N"),
    ("json", JSON, 199, -1, "U"),
    ("float4", FLOAT4, 1021, 4, "N"),
    ("float8", FLOAT8, 1022, 8, "N"),
    ("unknown", UNKNOWN, 0, -2, "X"),
    ("inet", INET, 1041, -1, "I"),
    ("bpchar", BPCHAR, 1014, -1, "S"),
    ("varchar", VARCHAR, 1015, -1, "S"),
    ("date", DATE, 1182, 4, "D"),
    ("time", TIME, 1183, 8, "D"),
    ("timestamp", TIMESTAMP, 1115, 8, "D"),
    ("timestamptz", TIMESTAMPTZ, 1185, 8, "D"),
    ("interval", INTERVAL, 1187, 16, "T"),
    ("bit", BIT, 1561, -1, "V"),
    ("varbit", VARBIT, 1563, -1, "V"),
    ("numeric", NUMERIC, 1231, -1, "N"),
    ("uuid", UUID, 2951, 16, "U"),
    ("jsonb", JSONB, 3807, -1, "U"),
)
TYPE_NAMES = {oid: name for name, oid, _, _, _ in TYPES}
#: An array type's OID -> its element type's OID.
ARRAY_ELEMENTS = {array: oid for _, oid, array, _, _ in TYPES if array}
TYPE_NAMES.update((array, f"{TYPE_NAMES[oid]}[]") for array, oid in ARRAY_ELEMENTS.items())
#: An element type's OID -> its array type's OID.
ARRAY_OF = {oid: array for array, oid in ARRAY_ELEMENTS.items()}
TEXT_ARRAY = ARRAY_OF[TEXT]
TYPE_LENGTHS = {oid: length for _, oid, _, length, _ in TYPES}


def oid_of(t: SqlType | None, sample: Any = None) -> int:
    """The OID a column of engine type ``t`` is described with (``sample``: a value, when untyped)."""
    if t is None:
        return _oid_of_value(sample)
    k = t.kind
    if k is Kind.INT:
        return INT2 if t.bits <= 16 else INT4 if t.bits <= 32 else INT8
    if k is Kind.UINT:
        return INT4 if t.bits <= 16 else INT8 if t.bits <= 32 else NUMERIC
    if k is Kind.FLOAT:
        return FLOAT4 if t.bits <= 32 else FLOAT8
    if k is Kind.TIMESTAMP:
        return TIMESTAMPTZ if t.zoned else TIMESTAMP
    if k is Kind.ARRAY and t.element is not None:
        return ARRAY_OF.get(oid_of(t.element), TEXT)
    return _KIND_OIDS.get(k, TEXT)


_KIND_OIDS = {
    Kind.BOOL: BOOL,
    Kind.VARINT: NUMERIC,
    Kind.DECIMAL: NUMERIC,
    Kind.TEXT: TEXT,
    Kind.BYTES: BYTEA,
    Kind.DATE: DATE,
    Kind.DATETIME: TIMESTAMPTZ,
    Kind.TIME: TIME,
    Kind.INTERVAL: INTERVAL,
    Kind.JSON: JSONB,
    Kind.UUID: UUID,
    Kind.TIMEUUID: UUID,
    Kind.INET: INET,
}


def _oid_of_value(v: Any) -> int:
    if isinstance(v, json_doc.JsonText):  # a jsonb value computed (doc || '{..}'): jsonb, not text
        return JSONB
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT8
    if isinstance(v, float):
        return FLOAT8
    if isinstance(v, Decimal):
        return NUMERIC
    if isinstance(v, bytes | bytearray | memoryview):
        return BYTEA
    if isinstance(v, dt.datetime):
        return TIMESTAMPTZ if v.tzinfo is not None else TIMESTAMP
    if isinstance(v, dt.date):
        return DATE
    if isinstance(v, dt.time):
        return TIME
    if isinstance(v, dt.timedelta | Interval):
        return INTERVAL
    if isinstance(v, uuid.UUID):
        return UUID
    if isinstance(v, list):  # an array (JSON values are text): its elements' array type
        first = next((x for x in v if x is not None), None)
        if isinstance(first, dict | list):
            return JSONB
        return TEXT_ARRAY if first is None else ARRAY_OF.get(_oid_of_value(first), TEXT_ARRAY)
    if isinstance(v, dict):
        return JSONB
    return TEXT


# ------------------------------------------------------------------------------------- text out
def text_value(v: Any) -> str:
    """PostgreSQL's text output of a value (``bytea`` in hex, ``timestamptz`` with ``+00``)."""
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return float_text(v)
    if isinstance(v, Decimal):
        return "NaN" if v.is_nan() else format(v.copy_abs() if v.is_zero() else v, "f")  # no -0
    if isinstance(v, bytes | bytearray | memoryview):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dt.datetime):
        return timestamp_text(v)
    if isinstance(v, dt.time):
        return time_text(v)
    if isinstance(v, dt.date | uuid.UUID):
        return v.isoformat() if not isinstance(v, uuid.UUID) else str(v)
    if isinstance(v, dt.timedelta | Interval):
        return interval_text(v)
    if isinstance(v, dict | list):
        return json_doc.spaced(v)
    if isinstance(v, tuple | set | frozenset):
        return array_to_text(v, text_value)
    return str(v)


def text_array(v: Any) -> str:
    """An array's text output as PostgreSQL's array_out writes it: ``{1,2,NULL,"a b"}``."""
    if not isinstance(v, list | tuple):
        return text_value(v)
    return array_to_text(v, text_value)


def text_json(v: Any) -> bytes:
    """jsonb text output as PostgreSQL prints it: ``{"a": [1, 2]}``."""
    if isinstance(v, str | bytes):
        try:
            v = json_doc.loads(v)
        except ValueError:
            return v.encode() if isinstance(v, str) else v
    return json_doc.spaced(v, pg_order=True).encode()


# ----------------------------------------------------------------------------------- binary out
PG_EPOCH = dt.date(2000, 1, 1)
PG_EPOCH_DT = dt.datetime(2000, 1, 1)
PG_EPOCH_TZ = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_NUMERIC_NAN = 0xC000


def _numeric_binary(v: Decimal) -> bytes:
    if v.is_nan():
        return struct.pack("!hhhh", 0, 0, _NUMERIC_NAN, 0)
    if v.is_zero():
        v = v.copy_abs()  # a numeric has no negative zero
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    dscale = max(0, -exp)
    # split the integer of all digits into base-10000 groups aligned on the decimal point
    ds = "".join(map(str, digits))
    if exp > 0:
        ds += "0" * exp
        exp = 0
    int_part, frac_part = (ds[: len(ds) + exp], ds[len(ds) + exp :]) if exp < 0 else (ds, "")
    int_part = int_part.lstrip("0")
    int_part = "0" * (-len(int_part) % 4) + int_part
    frac_part = frac_part + "0" * (-len(frac_part) % 4)
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[-1] == 0:
        groups.pop()
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    if not groups:
        weight = 0
    return struct.pack(f"!hhhh{len(groups)}h", len(groups), weight, 0x4000 if sign else 0, dscale, *groups)


def _array_binary(v: list[Any], oid: int) -> bytes:
    """array_send: dimensions, a has-NULLs flag, the element OID, length and lower bound (1),
    then each element as a length (-1: NULL) and its binary form."""
    element = ARRAY_ELEMENTS[oid]
    if not v:
        return struct.pack("!iii", 0, 0, element)
    parts = []
    for x in v:
        if x is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            data = binary_value(x, element)
            parts.append(struct.pack("!i", len(data)) + data)
    has_nulls = any(x is None for x in v)
    return struct.pack("!iiiii", 1, int(has_nulls), element, len(v), 1) + b"".join(parts)


def binary_value(v: Any, oid: int) -> bytes:
    """The binary wire format of ``v`` for a column of type ``oid``."""
    if oid in ARRAY_ELEMENTS:
        return _array_binary(v, oid)
    if oid == BOOL:
        return b"\x01" if v else b"\x00"
    if oid == INT8:
        return struct.pack("!q", v)
    if oid == INT4:
        return struct.pack("!i", v)
    if oid == INT2:
        return struct.pack("!h", v)
    if oid == FLOAT8:
        return struct.pack("!d", v)
    if oid == FLOAT4:
        return struct.pack("!f", v)
    if oid == NUMERIC:
        return _numeric_binary(v if isinstance(v, Decimal) else Decimal(v))
    if oid == BYTEA:
        return bytes(v) if not isinstance(v, str) else v.encode()
    if oid == UUID:
        return v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(str(v)).bytes
    if oid == DATE:
        return struct.pack("!i", (v - PG_EPOCH).days)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        base = PG_EPOCH_TZ if v.tzinfo is not None else PG_EPOCH_DT
        d = v - base
        return struct.pack("!q", (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds)
    if oid == TIME:
        return struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)
    if oid == INTERVAL:
        months, days, micros = interval_fields(v)
        return struct.pack("!qii", micros, days, months)
    if oid == JSONB:
        return b"\x01" + text_json(v)
    return text_value(v).encode()


#: OIDs whose binary format we write; others are sent as text even when binary was asked.
_BINARY_SCALARS = frozenset(
    {BOOL, INT8, INT4, INT2, FLOAT8, FLOAT4, NUMERIC, BYTEA, UUID, DATE, TIMESTAMP, TIMESTAMPTZ, TIME}
    | {INTERVAL, JSONB, JSON, TEXT, VARCHAR, NAME, BPCHAR, CHAR}
)
BINARY_OUT = _BINARY_SCALARS | {ARRAY_OF[oid] for oid in _BINARY_SCALARS if oid in ARRAY_OF}


# ------------------------------------------------------------------------------------ params in
def _parse_ts(s: str) -> dt.datetime:
    s = s.strip()
    if s.endswith(("+00", "-00")) or (len(s) > 3 and s[-3] in "+-" and s[-2:].isdigit()):
        s += ":00"
    if s.endswith(" BC"):
        raise TypeMismatch(f'timestamp "{s}" before year 1 is not supported')
    return dt.datetime.fromisoformat(s)


def _parse_interval(s: str) -> dt.timedelta | Interval:
    """PostgreSQL's interval text (``1 day 02:03:04.5``, ``-00:00:01``, ``2 mons``, what psycopg
    sends for a timedelta: ``1 day 2:03:04``); with months, an Interval (see
    ``changefeed.engine.intervals``)."""
    return parse_interval_value(s.strip().replace(",", " "))


def _parse_bool(s: str) -> bool:
    t = s.strip().lower()
    if t in ("t", "true", "yes", "on", "1", "y"):
        return True
    if t in ("f", "false", "no", "off", "0", "n"):
        return False
    raise TypeMismatch(f'invalid input syntax for type boolean: "{s}"')


def _parse_bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s[i + 1 : i + 2] == "\\":
            out.append(92)
            i += 2
        elif c == "\\":
            out.append(int(s[i + 1 : i + 4], 8))
            i += 4
        else:
            out += c.encode()
            i += 1
    return bytes(out)


#: PostgreSQL's numeric holds up to 131,072 digits before the point and 16,383 after.
_NUMERIC_DIGITS = (131_072, 16_383)


def _parse_numeric(text: str) -> Decimal:
    value = Decimal(text)  # InvalidOperation (an ArithmeticError) on what is not a number
    if value.is_finite() and value and not -_NUMERIC_DIGITS[1] <= value.adjusted() < _NUMERIC_DIGITS[0]:
        raise NumericValueOutOfRange("value overflows numeric format")
    return value


_TEXT_IN: dict[int, Callable[[str], Any]] = {
    BOOL: _parse_bool,
    INT8: int,
    INT4: int,
    INT2: int,
    OID: int,
    FLOAT8: float,
    FLOAT4: float,
    NUMERIC: _parse_numeric,
    BYTEA: _parse_bytea,
    UUID: uuid.UUID,
    DATE: dt.date.fromisoformat,
    TIMESTAMP: _parse_ts,
    TIMESTAMPTZ: _parse_ts,
    TIME: dt.time.fromisoformat,
    INTERVAL: _parse_interval,
    JSON: json_doc.loads,
    JSONB: json_doc.loads,
}


def _numeric_from_binary(b: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhhh", b)
    if sign == _NUMERIC_NAN:
        return Decimal("NaN")
    digits = struct.unpack_from(f"!{ndigits}h", b, 8)
    value = Decimal(0)
    for i, d in enumerate(digits):
        value += Decimal(d).scaleb(4 * (weight - i))
    if sign == 0x4000:
        value = -value
    return value.quantize(Decimal(1).scaleb(-dscale)) if dscale else value.quantize(Decimal(1))


@dataclass(frozen=True)
class BinaryInt:
    """How an integer type's binary format carries it: a big-endian integer of ``width`` bytes,
    as ``struct`` and NumPy read it."""

    width: int
    struct_code: str
    numpy: str
    signed: bool

    @property
    def lo(self) -> int:
        """The smallest value the format carries."""
        return -(1 << (8 * self.width - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        """The largest value the format carries."""
        return (1 << (8 * self.width - 1 if self.signed else 8 * self.width)) - 1


#: Types whose values are text as they are, in either format (0: a parameter of no declared type).
TEXT_OIDS = frozenset({0, TEXT, VARCHAR, UNKNOWN})

#: The integer types by OID, read in their width (PostgreSQL's int8recv, int4recv, int2recv, oidrecv).
BINARY_INTS: dict[int, BinaryInt] = {
    INT8: BinaryInt(8, "q", ">i8", True),
    INT4: BinaryInt(4, "i", ">i4", True),
    INT2: BinaryInt(2, "h", ">i2", True),
    OID: BinaryInt(4, "I", ">u4", False),
}


def _from_binary(b: bytes, oid: int) -> Any:
    if oid == BOOL:
        if len(b) != 1:
            raise ValueError("bool is one byte")
        return b != b"\x00"
    wire = BINARY_INTS.get(oid)
    if wire is not None:
        if len(b) != wire.width:  # PostgreSQL's int4recv and the others read their width
            raise ValueError("integer of another width")
        return int.from_bytes(b, "big", signed=wire.signed)
    if oid == FLOAT8:
        return struct.unpack("!d", b)[0]
    if oid == FLOAT4:
        return struct.unpack("!f", b)[0]
    if oid == NUMERIC:
        return _numeric_from_binary(b)
    if oid == BYTEA:
        return b
    if oid == UUID:
        return uuid.UUID(bytes=b)
    if oid == DATE:
        return PG_EPOCH + dt.timedelta(days=struct.unpack("!i", b)[0])
    if oid == TIMESTAMP:
        return PG_EPOCH_DT + dt.timedelta(microseconds=struct.unpack("!q", b)[0])
    if oid == TIMESTAMPTZ:
        return PG_EPOCH_TZ + dt.timedelta(microseconds=struct.unpack("!q", b)[0])
    if oid == TIME:
        us = struct.unpack("!q", b)[0]
        s, us = divmod(us, 1_000_000)
        return dt.time(s // 3600, s // 60 % 60, s % 60, us)
    if oid == INTERVAL:
        us, days, months = struct.unpack("!qii", b)
        return interval_of(months, days, us)
    if oid == JSONB:
        return json_doc.loads(b[1:])
    if oid == JSON:
        return json_doc.loads(b)
    if oid in ARRAY_ELEMENTS:
        return array_from_binary(b, _from_binary)
    return b.decode()


#: OID -> (kind as in ``changefeed.engine.types.Kind``, CockroachDB's type name), for the
#: errors of parameters that do not parse.
_PARSE_AS = {
    BOOL: ("bool", "bool"), INT8: ("int", "int"), INT4: ("int", "int4"), INT2: ("int", "int2"),
    OID: ("int", "oid"), FLOAT8: ("float", "float"), FLOAT4: ("float", "float4"),
    NUMERIC: ("decimal", "decimal"), BYTEA: ("bytes", "bytes"), UUID: ("uuid", "uuid"),
    DATE: ("date", "date"), TIMESTAMP: ("timestamp", "timestamp"),
    TIMESTAMPTZ: ("timestamp", "timestamptz"), TIME: ("time", "time"),
    INTERVAL: ("interval", "interval"), JSON: ("json", "jsonb"), JSONB: ("json", "jsonb"),
}  # fmt: skip


#: What decoding a value raises on bytes or text that are not one of its type (``Decimal``:
#: InvalidOperation, an ArithmeticError).
DECODE_ERRORS = (
    ValueError,
    TypeMismatch,
    struct.error,
    UnicodeDecodeError,
    IndexError,
    ArithmeticError,
)


def decode_binary(data: bytes | None, oid: int) -> Any:
    """A value's binary form as its Python value (COPY's binary format)."""
    if data is None:
        return None
    try:
        return _from_binary(data, oid)
    except DECODE_ERRORS:
        name = TYPE_NAMES.get(oid, str(oid))
        raise InvalidBinaryRepresentation(f"incorrect binary data format for type {name}") from None


def text_in(oid: int) -> Callable[[str], Any] | None:
    """The parser of a value's text form for ``oid`` (None: the text is the value); it raises
    one of :data:`DECODE_ERRORS` on text it does not take."""
    return _TEXT_IN.get(oid)


def text_error(text: str, oid: int) -> TypeMismatch:
    """The error of ``text`` that the parser of ``oid`` did not take, as CockroachDB words it."""
    if oid not in _PARSE_AS:
        return InvalidTextRepresentation(f"invalid input for type {TYPE_NAMES.get(oid, str(oid))}")
    kind, name = _PARSE_AS[oid]
    return crdb_parse_error(kind, name, text)


def decode_param(data: bytes | None, oid: int, binary: bool, index: int = 0) -> Any:
    """A bound parameter's Python value: by its declared OID; unspecified text stays a string.
    ``index``: the parameter's position (0-based), for errors (CockroachDB's ``error in argument
    for $1: could not parse "x" as type int: ...``)."""
    if data is None:
        return None
    try:
        if binary:
            return _from_binary(data, oid)
        text = data.decode()
        element = ARRAY_ELEMENTS.get(oid)
        if element is not None:
            return array_from_text(text, _TEXT_IN.get(element))
        fn = _TEXT_IN.get(oid)
        return fn(text) if fn is not None else text
    except DECODE_ERRORS:
        where = f"error in argument for ${index + 1}"
        if binary or oid not in _PARSE_AS:
            name = TYPE_NAMES.get(oid, str(oid))
            raise InvalidBinaryRepresentation(
                f"{where}: incorrect binary data format for type {name}"
                if binary
                else f"{where}: invalid input for type {name}"
            ) from None
        err = text_error(data.decode("utf-8", "replace"), oid)
        raise type(err)(f"{where}: {err}") from None


def decode_column(
    col: list[bytes | None],
    oid: int,
    binary: bool,
    one: Callable[[bytes | None, int, bool], Any] | None = None,
) -> list[Any]:
    """Values of one type from many rows (as :func:`decode_param` decodes each): integers and
    text in one pass, other types value by value with ``one`` (default :func:`decode_param`),
    which also names the value at fault when the one pass fails."""
    try:
        wire = BINARY_INTS.get(oid)
        if wire is not None:
            if not binary:
                return [None if v is None else int(v) for v in col]
            size = wire.width
            if None not in col:
                joined = b"".join(col)  # type: ignore[arg-type]
                if len(joined) == size * len(col):  # every value of the type's width: one unpack
                    return list(struct.unpack(f"!{len(col)}{wire.struct_code}", joined))
            if all(v is None or len(v) == size for v in col):  # else decode_param names the bad one
                return [None if v is None else int.from_bytes(v, "big", signed=wire.signed) for v in col]
        if oid in TEXT_OIDS:  # text in either format is its UTF-8 bytes
            if None not in col:
                return list(map(bytes.decode, col))  # type: ignore[arg-type]
            return [None if v is None else v.decode() for v in col]
    except (ValueError, UnicodeDecodeError):
        pass  # the value at fault gets its error from decode_param below
    decode = one or decode_param
    return [decode(v, oid, binary) for v in col]
