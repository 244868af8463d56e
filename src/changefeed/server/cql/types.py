"""CQL data types on the wire (native_protocol_v4.spec §6): type options, value codecs.

Every column type the store has maps to one CQL type: CQL tables' own types one to one, the YDB and
CockroachDB types of SQL tables to the nearest CQL type (``Uint64`` as ``varint``, ``Json`` as
``text``, arrays as ``list<..>``). An encoder turns a Python value into a cell with its ``[int]``
length in front; a decoder turns a bound ``[value]``'s bytes into the Python value the engine
checks and stores.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import TypeMismatch


@dataclass(frozen=True, slots=True)
class CqlType:
    """A CQL type: its option id, its CQL name, and its element types (collections, tuples)."""

    id: int
    name: str
    params: tuple[CqlType, ...] = ()

    def __str__(self) -> str:
        if self.params:
            inner = ", ".join(str(p) for p in self.params)
            return f"{self.name}<{inner}>"
        return self.name

    def option(self) -> bytes:
        """The ``[option]`` describing this type."""
        head = struct.pack(">H", self.id)
        if self.id in (LIST, SET):
            return head + self.params[0].option()
        if self.id == MAP:
            return head + self.params[0].option() + self.params[1].option()
        if self.id == TUPLE:
            return head + struct.pack(">H", len(self.params)) + b"".join(p.option() for p in self.params)
        return head


ASCII, BIGINT, BLOB, BOOLEAN, COUNTER, DECIMAL, DOUBLE, FLOAT, INT = (
    0x01,
    0x02,
    0x03,
    0x04,
    0x05,
    0x06,
    0x07,
    0x08,
    0x09,
)
TIMESTAMP, UUID, VARCHAR, VARINT, TIMEUUID, INET, DATE, TIME = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12
SMALLINT, TINYINT, DURATION = 0x13, 0x14, 0x15
LIST, MAP, SET, TUPLE = 0x20, 0x21, 0x22, 0x31

_SIMPLE = {
    "ascii": ASCII,
    "bigint": BIGINT,
    "blob": BLOB,
    "boolean": BOOLEAN,
    "counter": COUNTER,
    "decimal": DECIMAL,
    "double": DOUBLE,
    "float": FLOAT,
    "int": INT,
    "timestamp": TIMESTAMP,
    "uuid": UUID,
    "text": VARCHAR,
    "varchar": VARCHAR,
    "varint": VARINT,
    "timeuuid": TIMEUUID,
    "inet": INET,
    "date": DATE,
    "time": TIME,
    "smallint": SMALLINT,
    "tinyint": TINYINT,
    "duration": DURATION,
}


def simple(name: str) -> CqlType:
    return CqlType(_SIMPLE[name], "text" if name == "varchar" else name)


def parse(text: str) -> CqlType:
    """A type from its CQL text: ``int``, ``frozen<set<blob>>``, ``map<text, text>``."""
    t = text.strip()
    if t.startswith("frozen<") and t.endswith(">"):
        return parse(t[7:-1])
    if "<" in t:
        name, inner = t.split("<", 1)
        args = _split(inner[:-1])
        kind = {"list": LIST, "set": SET, "map": MAP, "tuple": TUPLE}[name.strip()]
        return CqlType(kind, name.strip(), tuple(parse(a) for a in args))
    return simple(t)


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "<"
        depth -= ch == ">"
        cur += ch
    out.append(cur)
    return out


def of_sql(t: SqlType | None) -> CqlType:
    """The CQL type of a column or result type (text when unknown)."""
    if t is None:
        return simple("text")
    k = t.kind
    if t.name in _SIMPLE and k is not Kind.ARRAY:
        return simple(t.name)
    if k is Kind.BOOL:
        return simple("boolean")
    if k is Kind.INT:
        return simple({8: "tinyint", 16: "smallint", 32: "int"}.get(t.bits, "bigint"))
    if k is Kind.UINT:
        return simple({8: "smallint", 16: "int", 32: "bigint"}.get(t.bits, "varint"))
    if k is Kind.VARINT:
        return simple("varint")
    if k is Kind.FLOAT:
        return simple("float" if t.bits == 32 else "double")
    if k is Kind.DECIMAL:
        return simple("decimal")
    if k is Kind.BYTES:
        return simple("blob")
    if k is Kind.DATE:
        return simple("date")
    if k in (Kind.DATETIME, Kind.TIMESTAMP):
        return simple("timestamp")
    if k is Kind.TIME:
        return simple("time")
    if k is Kind.INTERVAL:
        return simple("duration")
    if k is Kind.UUID:
        return simple("uuid")
    if k is Kind.TIMEUUID:
        return simple("timeuuid")
    if k is Kind.INET:
        return simple("inet")
    if k is Kind.ARRAY and t.element is not None:
        return CqlType(LIST, "list", (of_sql(t.element),))
    return simple("text")


# ====================================================================== encoding
_NULL = struct.pack(">i", -1)
_I = struct.Struct(">i")
_i4 = struct.Struct(">ii")
_u4 = struct.Struct(">iI")
_q = struct.Struct(">iq")
_h = struct.Struct(">ih")
_b = struct.Struct(">ib")
_d = struct.Struct(">id")
_f = struct.Struct(">if")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)

Encoder = Callable[[Any], bytes]


def _cell(b: bytes) -> bytes:
    return _I.pack(len(b)) + b


def varint_bytes(n: int) -> bytes:
    """Two's complement, big-endian, minimal length."""
    length = max(1, (n.bit_length() + 8) // 8)
    return n.to_bytes(length, "big", signed=True)


def _timestamp_ms(v: Any) -> int:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        delta = v - _EPOCH
        ms: int = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
        return ms
    if isinstance(v, dt.date):
        return (v - _EPOCH_DATE).days * 86_400_000
    return int(v)


def _vint(n: int) -> bytes:
    """An unsigned vint (Cassandra's VIntCoding): leading one bits count the extra bytes."""
    size = (63 + 9 * max(n.bit_length(), 1)) >> 6
    if size >= 9:
        return b"\xff" + n.to_bytes(8, "big")
    raw = bytearray(n.to_bytes(size, "big"))
    raw[0] |= ~(0xFF >> (size - 1)) & 0xFF
    return bytes(raw)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def duration_bytes(v: dt.timedelta) -> bytes:
    us = v.days * 86_400_000_000 + v.seconds * 1_000_000 + v.microseconds
    days, rest_us = divmod(abs(us), 86_400_000_000)
    sign = -1 if us < 0 else 1
    return _vint(0) + _vint(_zigzag(sign * days)) + _vint(_zigzag(sign * rest_us * 1000))


def encoder(t: CqlType) -> Encoder:
    """A function from a Python value (or None) to the cell ``[bytes]``."""
    k = t.id

    def nullable(f: Callable[[Any], bytes]) -> Encoder:
        def enc(v: Any) -> bytes:
            return _NULL if v is None else f(v)

        return enc

    if k in (VARCHAR, ASCII):
        return nullable(lambda v: _cell(str(v).encode()))
    if k in (BIGINT, COUNTER):
        return nullable(lambda v: _q.pack(8, v))
    if k == INT:
        return nullable(lambda v: _i4.pack(4, v))
    if k == SMALLINT:
        return nullable(lambda v: _h.pack(2, v))
    if k == TINYINT:
        return nullable(lambda v: _b.pack(1, v))
    if k == BOOLEAN:
        return nullable(lambda v: b"\x00\x00\x00\x01\x01" if v else b"\x00\x00\x00\x01\x00")
    if k == BLOB:
        return nullable(lambda v: _cell(bytes(v)))
    if k == DOUBLE:
        return nullable(lambda v: _d.pack(8, float(v)))
    if k == FLOAT:
        return nullable(lambda v: _f.pack(4, float(v)))
    if k in (UUID, TIMEUUID):
        return nullable(
            lambda v: b"\x00\x00\x00\x10" + (v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(str(v)).bytes)
        )
    if k == TIMESTAMP:
        return nullable(lambda v: _q.pack(8, _timestamp_ms(v)))
    if k == DATE:
        # days since 1970-01-01 plus 2**31, unsigned (dates before the epoch too)
        return nullable(lambda v: _u4.pack(4, (v - _EPOCH_DATE).days + (1 << 31)))
    if k == TIME:
        return nullable(
            lambda v: _q.pack(
                8, ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000_000 + v.microsecond * 1000
            )
        )
    if k == VARINT:
        return nullable(lambda v: _cell(varint_bytes(int(v))))
    if k == DECIMAL:

        def dec(v: Any) -> bytes:
            d = v if isinstance(v, Decimal) else Decimal(str(v))
            sign, digits, exp = d.as_tuple()
            unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
            scale = -int(exp) if isinstance(exp, int) else 0
            return _cell(struct.pack(">i", scale) + varint_bytes(unscaled))

        return nullable(dec)
    if k == INET:
        return nullable(lambda v: _cell(ipaddress.ip_address(str(v).split("/")[0]).packed))
    if k == DURATION:
        return nullable(lambda v: _cell(duration_bytes(v)))
    if k in (LIST, SET):
        inner = encoder(t.params[0])
        return nullable(lambda v: _cell(_I.pack(len(v)) + b"".join(inner(x) for x in v)))
    if k == MAP:
        ke, ve = encoder(t.params[0]), encoder(t.params[1])
        return nullable(lambda v: _cell(_I.pack(len(v)) + b"".join(ke(a) + ve(b) for a, b in v.items())))
    raise TypeMismatch(f"no CQL encoding for type {t}")


# ====================================================================== decoding
Decoder = Callable[[bytes], Any]


def _read_vint(b: bytes, pos: int) -> tuple[int, int]:
    first = b[pos]
    extra = 0
    while extra < 8 and first & (0x80 >> extra):
        extra += 1
    value = first & (0xFF >> extra) if extra < 8 else 0
    for i in range(extra):
        value = (value << 8) | b[pos + 1 + i]
    return value, pos + 1 + extra


def decoder(t: CqlType) -> Decoder:
    """A function from a bound value's bytes to its Python value; raises TypeMismatch."""
    k = t.id

    def checked(size: int, fmt: str) -> Decoder:
        s = struct.Struct(fmt)

        def dec(b: bytes) -> Any:
            if len(b) != size:
                raise TypeMismatch(f"expected {size} bytes for a {t} value, got {len(b)}")
            return s.unpack(b)[0]

        return dec

    if k in (VARCHAR, ASCII):

        def text(b: bytes) -> str:
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                raise TypeMismatch(f"invalid UTF-8 bytes for a {t} value") from None

        return text
    if k in (BIGINT, COUNTER):
        return checked(8, ">q")
    if k == INT:
        return checked(4, ">i")
    if k == SMALLINT:
        return checked(2, ">h")
    if k == TINYINT:
        return checked(1, ">b")
    if k == DOUBLE:
        return checked(8, ">d")
    if k == FLOAT:
        return checked(4, ">f")
    if k == BOOLEAN:
        return lambda b: bool(b and b[0])
    if k == BLOB:
        return bytes
    if k in (UUID, TIMEUUID):

        def uid(b: bytes) -> uuid.UUID:
            if len(b) != 16:
                raise TypeMismatch(f"expected 16 bytes for a {t} value, got {len(b)}")
            return uuid.UUID(bytes=b)

        return uid
    if k == TIMESTAMP:
        ms = checked(8, ">q")
        return lambda b: _EPOCH + dt.timedelta(milliseconds=ms(b))
    if k == DATE:
        days = checked(4, ">I")
        return lambda b: _EPOCH_DATE + dt.timedelta(days=days(b) - (1 << 31))
    if k == TIME:
        ns = checked(8, ">q")

        def tod(b: bytes) -> dt.time:
            n = ns(b)
            if not 0 <= n < 86_400 * 10**9:
                raise TypeMismatch(f"{n} ns is not a time of day")
            s, rest = divmod(n, 10**9)
            return dt.time(s // 3600, s // 60 % 60, s % 60, rest // 1000)

        return tod
    if k == VARINT:
        return lambda b: int.from_bytes(b, "big", signed=True)
    if k == DECIMAL:

        def dec(b: bytes) -> Decimal:
            if len(b) < 4:
                raise TypeMismatch(f"expected at least 4 bytes for a decimal value, got {len(b)}")
            scale = struct.unpack(">i", b[:4])[0]
            return Decimal(int.from_bytes(b[4:], "big", signed=True)).scaleb(-scale)

        return dec
    if k == INET:

        def inet(b: bytes) -> str:
            if len(b) not in (4, 16):
                raise TypeMismatch(f"expected 4 or 16 bytes for an inet value, got {len(b)}")
            return str(ipaddress.ip_address(b))

        return inet
    if k == DURATION:

        def duration(b: bytes) -> dt.timedelta:
            months, pos = _read_vint(b, 0)
            days, pos = _read_vint(b, pos)
            nanos, pos = _read_vint(b, pos)
            unzig = [(n >> 1) ^ -(n & 1) for n in (months, days, nanos)]
            if unzig[0]:
                raise TypeMismatch("durations with months cannot be stored")
            return dt.timedelta(days=unzig[1], microseconds=unzig[2] // 1000)

        return duration
    if k in (LIST, SET):
        inner = decoder(t.params[0])

        def coll(b: bytes) -> list[Any]:
            n = struct.unpack(">i", b[:4])[0]
            pos, out = 4, []
            for _ in range(n):
                size = struct.unpack(">i", b[pos : pos + 4])[0]
                pos += 4
                out.append(None if size < 0 else inner(b[pos : pos + size]))
                pos += max(size, 0)
            return out

        return coll
    raise TypeMismatch(f"bound values of type {t} are not supported")


# ====================================================================== rows
RowsEncoder = Callable[[Sequence[Sequence[Any]]], bytes]
_INLINE = {
    INT: "NULL if {v} is None else I4(4, {v})",
    BIGINT: "NULL if {v} is None else Q8(8, {v})",
    COUNTER: "NULL if {v} is None else Q8(8, {v})",
    SMALLINT: "NULL if {v} is None else H2(2, {v})",
    TINYINT: "NULL if {v} is None else B1(1, {v})",
    DOUBLE: "NULL if {v} is None else D8(8, {v})",
    BOOLEAN: "NULL if {v} is None else (TRUE if {v} else FALSE)",
    VARCHAR: "NULL if {v} is None else I(len({b} := {v}.encode())) + {b}",
    UUID: "NULL if {v} is None else U16 + {v}.bytes",
    TIMEUUID: "NULL if {v} is None else U16 + {v}.bytes",
}


def rows_encoder(types: Sequence[CqlType]) -> RowsEncoder:
    """A function that encodes many rows' cells in one pass: generated for the column types, so
    each common cell is one inline expression rather than a function call (a log page's rows are
    the hot path of every CDC read)."""
    env: dict[str, Any] = {
        "NULL": _NULL,
        "I4": _i4.pack,
        "Q8": _q.pack,
        "H2": _h.pack,
        "B1": _b.pack,
        "D8": _d.pack,
        "I": _I.pack,
        "TRUE": b"\x00\x00\x00\x01\x01",
        "FALSE": b"\x00\x00\x00\x01\x00",
        "U16": b"\x00\x00\x00\x10",
        "bytes_": bytes,
    }
    exprs = []
    for i, t in enumerate(types):
        expr = _INLINE.get(t.id)
        if expr is None:
            env[f"E{i}"] = encoder(t)
            expr = f"E{i}({{v}})"
        exprs.append("(" + expr.format(v=f"v{i}", b=f"b{i}") + ")")
    names = ", ".join(f"v{i}" for i in range(len(types)))
    unpack = f"        {names}{',' if len(types) == 1 else ''} = r"
    body = [
        "def encode(rows):",
        "    out = []",
        "    add = out.append",
        "    join = b''.join",
        "    for r in rows:",
        unpack,
        f"        add(join(({', '.join(exprs)},)))",
        "    return join(out)",
    ]
    exec("\n".join(body), env)
    fn: RowsEncoder = env["encode"]
    return fn
