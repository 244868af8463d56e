"""Column types of the three dialects, their checks, and how they are stored.

One :class:`SqlType` describes a column whatever dialect declared it: YDB (``Uint64``, ``Utf8``,
``Timestamp``...), CQL (``int``, ``text``, ``timeuuid``...) or CockroachDB (``INT8``, ``STRING``,
``TIMESTAMPTZ``, ``BIT(3)``, ``STRING[]``, enums). Each type knows how to

* ``coerce`` a Python value (from a literal or a bind parameter) into its canonical Python value,
  raising :class:`~changefeed.exceptions.TypeMismatch` when it does not fit;
* ``to_db``/``from_db`` that value to and from SQLite storage (order-preserving for key types);
* tell its Arrow type for the Spark pipeline.

Canonical Python values: bool, int, float, Decimal, str, bytes, date, datetime (UTC-aware for
zoned types, naive for CockroachDB ``TIMESTAMP``), time, timedelta, UUID, list (arrays).
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import math
import re
import struct
import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_from_text
from changefeed.engine.intervals import Interval
from changefeed.engine.temporal_text import (
    TextRejected,
    parse_interval_value,
    read_date,
    read_time,
    read_timestamp,
)
from changefeed.engine.type_errors import YDB_SPELLINGS, mismatch, out_of_range, voice_of
from changefeed.exceptions import (
    NumericValueOutOfRange,
    TypeMismatch,
    UnsupportedFeature,
    ValueTooLarge,
)

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_DATE = dt.date(1970, 1, 1)
UINT64_BIAS = 1 << 63
#: Largest string/bytes value accepted (YDB's default row limit is 8 MiB per cell).
MAX_VALUE_BYTES = 8 * 1024 * 1024


class Kind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    VARINT = "varint"
    FLOAT = "float"
    DECIMAL = "decimal"
    TEXT = "text"
    BYTES = "bytes"
    DATE = "date"
    DATETIME = "datetime"  # YDB Datetime: seconds
    TIMESTAMP = "timestamp"  # microseconds (CQL: milliseconds)
    TIME = "time"
    INTERVAL = "interval"
    JSON = "json"
    UUID = "uuid"
    TIMEUUID = "timeuuid"
    INET = "inet"
    BIT = "bit"
    ENUM = "enum"
    ARRAY = "array"


@dataclass(frozen=True, slots=True)
class SqlType:
    kind: Kind
    #: The name as the dialect spells it, e.g. ``Uint64``, ``int``, ``DECIMAL(10,2)``, ``STRING[]``.
    name: str
    bits: int = 64  # INT/UINT width, FLOAT 32/64
    precision: int | None = None  # DECIMAL
    scale: int | None = None
    length: int | None = None  # BIT(n) exact length, VARBIT(n)/VARCHAR(n) max length
    varying: bool = False  # VARBIT
    zoned: bool = True  # TIMESTAMP: aware (UTC) or naive (CockroachDB TIMESTAMP)
    millis: bool = False  # CQL timestamp resolution
    element: SqlType | None = None  # ARRAY
    labels: tuple[str, ...] = ()  # ENUM
    ascii: bool = False  # CQL ascii

    # ------------------------------------------------------------------ description
    def __str__(self) -> str:
        return self.name

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind.value, "name": self.name}
        for f in ("bits", "precision", "scale", "length", "varying", "zoned", "millis", "ascii"):
            d[f] = getattr(self, f)
        if self.element is not None:
            d["element"] = self.element.to_json()
        if self.labels:
            d["labels"] = list(self.labels)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> SqlType:
        return SqlType(
            kind=Kind(d["kind"]),
            name=d["name"],
            bits=d.get("bits", 64),
            precision=d.get("precision"),
            scale=d.get("scale"),
            length=d.get("length"),
            varying=d.get("varying", False),
            zoned=d.get("zoned", True),
            millis=d.get("millis", False),
            ascii=d.get("ascii", False),
            element=SqlType.from_json(d["element"]) if "element" in d else None,
            labels=tuple(d.get("labels", ())),
        )

    @property
    def is_numeric(self) -> bool:
        return self.kind in (Kind.INT, Kind.UINT, Kind.VARINT, Kind.FLOAT, Kind.DECIMAL)

    # ------------------------------------------------------------------ checking
    def coerce(self, value: object, what: str = "value") -> Any:
        """Return ``value`` as this type's canonical Python value, or raise TypeMismatch in the
        words of the system that declared the type (:mod:`changefeed.engine.type_errors`)."""
        if value is None:
            return None
        try:
            return _COERCE[self.kind](self, value)
        except _Unfit as exc:
            raise self._mismatch(value, what, exc.reason) from None
        except TypeMismatch as exc:
            text = str(exc)
            if what != "value" and not text.startswith(what) and self.voice != "crdb":
                text = f"{what}: " + (text[len("value: ") :] if text.startswith("value: ") else text)
                raise type(exc)(text) from None
            raise
        except (ValueError, TypeError, ArithmeticError, InvalidOperation) as exc:
            # Python's own words (``invalid literal for int()``) never reach the user
            raise self._mismatch(value, what, exc.reason if isinstance(exc, TextRejected) else "") from None

    @property
    def voice(self) -> str:
        """Whose words this type's errors use: ``crdb``, ``ydb`` or ``cql``."""
        return voice_of(self.kind.value, self.name)

    def _mismatch(self, value: object, what: str, why: str = "") -> TypeMismatch:
        return mismatch(self.kind.value, self.name, value, what, why)

    def storer(self, what: str) -> Any:
        """A fast ``value -> storage value`` function with this type's checks (for bulk writes)."""
        k = self.kind
        if k in (Kind.INT, Kind.UINT):
            lo, hi = _int_range(self)
            bias = UINT64_BIAS if k is Kind.UINT and self.bits == 64 else 0

            def store_int(v: Any) -> Any:
                if type(v) is int and lo <= v <= hi:
                    return v - bias
                if v is None:
                    return None
                return self.to_db(self.coerce(v, what))

            return store_int
        if k is Kind.TEXT and self.length is None and not self.ascii:

            def store_text(v: Any) -> Any:
                if type(v) is str and len(v) <= MAX_VALUE_BYTES // 4:
                    return v
                if v is None:
                    return None
                return self.to_db(self.coerce(v, what))

            return store_text
        if k is Kind.FLOAT and self.bits <= 32:

            def store_single(v: Any) -> Any:
                if type(v) is float:
                    return single(v)
                if v is None:
                    return None
                return self.to_db(self.coerce(v, what))

            return store_single
        if k is Kind.FLOAT:

            def store_float(v: Any) -> Any:
                if type(v) is float:
                    return v
                if v is None:
                    return None
                return self.to_db(self.coerce(v, what))

            return store_float

        def store(v: Any) -> Any:
            return None if v is None else self.to_db(self.coerce(v, what))

        return store

    # ------------------------------------------------------------------ storage
    def to_db(self, value: Any) -> Any:
        """Canonical Python value -> SQLite value (order-preserving for key-able types)."""
        if value is None:
            return None
        return _TO_DB[self.kind](self, value)

    def from_db(self, raw: Any) -> Any:
        if raw is None:
            return None
        return _FROM_DB[self.kind](self, raw)

    @property
    def stored_as_is(self) -> bool:
        """Whether :meth:`from_db` returns every stored value unchanged."""
        return _FROM_DB[self.kind] is _ident


# ====================================================================================== coercion
class _Unfit(Exception):
    """A coercer's verdict: the value does not fit; ``reason`` (our words) may say why."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


def _int_range(t: SqlType) -> tuple[int, int]:
    if t.kind is Kind.UINT:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


def _c_bool(t: SqlType, v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        parsed = parse_bool_text(v)
        if parsed is not None:
            return parsed
    raise _Unfit()


def parse_bool_text(s: str) -> bool | None:
    """A boolean's text as PostgreSQL and CockroachDB read it: ``true``, ``yes``, ``on``, ``1``
    and ``false``, ``no``, ``off``, ``0``, any case, blanks around, and a prefix of a word that
    names only it (``t``, ``tr``, ``ye``, ``n``, ``of``; ``o`` is ambiguous); None otherwise."""
    w = s.strip().lower()
    if w in ("1", "on"):
        return True
    if w in ("0", "off", "of"):
        return False
    if w and ("true".startswith(w) or "yes".startswith(w)):
        return True
    if w and ("false".startswith(w) or "no".startswith(w)):
        return False
    return None


def _c_int(t: SqlType, v: object) -> int:
    if isinstance(v, bool):
        raise _Unfit()
    if isinstance(v, float):
        if not v.is_integer():
            raise _Unfit("not an integer")
        v = int(v)
    elif isinstance(v, Decimal):
        if v != v.to_integral_value():
            raise _Unfit("not an integer")
        v = int(v)
    elif isinstance(v, str):
        v = int(_number_text(v))
    if not isinstance(v, int):
        raise _Unfit()
    if t.kind is not Kind.VARINT:
        lo, hi = _int_range(t)
        if not lo <= v <= hi:
            raise out_of_range(t.kind.value, t.name, v, f"{lo}..{hi}")
    return v


def _c_float(t: SqlType, v: object) -> float:
    f = _c_float8(v)
    return f if t.bits > 32 else single(f, v)


def _c_float8(v: object) -> float:
    if isinstance(v, bool):
        raise _Unfit()
    if isinstance(v, float):
        return v
    if isinstance(v, int | Decimal):
        f = float(v)
        if math.isinf(f) and not (isinstance(v, Decimal) and v.is_infinite()):
            raise _out_of_float_range(str(v))
        return f
    if isinstance(v, str):
        f = float(_number_text(v))
        if math.isinf(f) and v.strip().lower().lstrip("+-") not in _INFINITY_SPELLINGS:
            raise _out_of_float_range(v)
        return f
    raise _Unfit()


_FLOAT4 = struct.Struct("<f")


def single(f: float, given: object = None) -> float:
    """``f`` rounded to single precision, as a 32-bit float column (FLOAT4/REAL, YQL's Float,
    CQL's float) holds it: ``0.1`` is ``0.10000000149011612``. Past its range, or a number that
    is not zero but rounds to it, is PostgreSQL's 22003 (``given``: the value as written)."""
    if f != f or f in (math.inf, -math.inf):
        return f
    try:
        r: float = _FLOAT4.unpack(_FLOAT4.pack(f))[0]
    except OverflowError:
        r = math.inf
    if r in (math.inf, -math.inf) or (r == 0.0 and f != 0.0):
        if isinstance(given, str):
            shown = given.strip()
        elif isinstance(given, int | Decimal) and not isinstance(given, bool):
            shown = format(Decimal(given), "f")
        else:
            raise NumericValueOutOfRange(f"value out of range: {'underflow' if r == 0.0 else 'overflow'}")
        raise NumericValueOutOfRange(f'"{shown}" is out of range for type real')
    return r


def single_digits(f: float) -> str | None:
    """The shortest ``%g`` text that reads back as ``f`` rounded to single precision (``0.1``
    for ``0.10000000149011612``), as float4out and Java's ``Float.toString`` choose their digits;
    None for a value past single precision's range. ``f`` finite."""
    try:
        want = _FLOAT4.unpack(_FLOAT4.pack(f))[0]
    except OverflowError:
        return None
    for digits in range(1, 10):
        text = f"{want:.{digits}g}"
        try:
            if _FLOAT4.unpack(_FLOAT4.pack(float(text)))[0] == want:
                return text
        except OverflowError:  # rounded past the largest single-precision number
            continue
    return repr(want)


def _number_text(v: str) -> str:
    """``v`` stripped, if it is a number as SQL writes one: Python's own readers also take
    ``1_000`` and digits of other scripts (``١٢``), which PostgreSQL and CockroachDB refuse."""
    text = v.strip()
    if "_" in text or not text.isascii():
        raise ValueError(text)
    return text


#: How a string may name an infinity (``float()`` also reads them; a huge number is not one).
_INFINITY_SPELLINGS = frozenset({"inf", "infinity"})


def _out_of_float_range(text: str) -> NumericValueOutOfRange:
    """PostgreSQL's error for a number past double precision's range (``1e400``), not Infinity."""
    return NumericValueOutOfRange(f'"{text.strip()}" is out of range for type double precision')


def _c_decimal(t: SqlType, v: object) -> Decimal:
    if isinstance(v, bool):
        raise _Unfit()
    if isinstance(v, float):
        # its shortest digits, a whole number without a point (3.0 is 3), as PostgreSQL's and
        # CockroachDB's float-to-decimal casts write it
        d = Decimal(int(v)) if v.is_integer() and abs(v) < 1e16 else Decimal(repr(v))
    elif isinstance(v, int | Decimal):
        d = Decimal(v)
    elif isinstance(v, str):
        d = Decimal(_number_text(v))
    else:
        raise _Unfit()
    if not d.is_finite():
        if t.precision is not None:
            raise _Unfit("not a finite number")
        return d
    if t.scale is not None:
        # half away from zero, as PostgreSQL and CockroachDB round to a scale (12.345 -> 12.35);
        # YDB's Decimal keeps the half-even rounding it had
        rounding = ROUND_HALF_EVEN if is_ydb_type(t) else ROUND_HALF_UP
        d = d.quantize(Decimal(1).scaleb(-t.scale), rounding=rounding)
    if t.precision is not None:
        digits = len(d.as_tuple().digits)
        exponent = d.as_tuple().exponent
        assert isinstance(exponent, int)
        integer_digits = digits + exponent
        if integer_digits > t.precision - (t.scale or 0) and d != 0:
            raise out_of_range(t.kind.value, t.name, v, f"precision {t.precision}, scale {t.scale or 0}")
    return d


def _c_text(t: SqlType, v: object) -> str:
    if isinstance(v, str):
        s = v
    elif isinstance(v, bytes) and not t.ascii:
        s = v.decode("utf-8")
    else:
        raise _Unfit()
    if len(s) * 4 > MAX_VALUE_BYTES and len(s.encode("utf-8")) > MAX_VALUE_BYTES:
        raise ValueTooLarge(
            f"value of {len(s.encode())} bytes exceeds the {MAX_VALUE_BYTES}-byte limit for {t.name}"
        )
    if t.length is not None and len(s) > t.length:
        raise ValueTooLarge(f"value too long for type {t.name} ({len(s)} > {t.length} characters)")
    if t.ascii and not s.isascii():
        raise _Unfit("not ASCII")
    return s


def _c_bytes(t: SqlType, v: object) -> bytes:
    if isinstance(v, bytes | bytearray | memoryview):
        b = bytes(v)
    elif isinstance(v, str):
        # CockroachDB's BYTES and PostgreSQL's bytea read text as bytea_in does; YDB's String
        # and the other systems' binaries take the text's bytes as they are
        b = bytea_in(v) if t.name == "BYTES" else v.encode("utf-8")
    else:
        raise _Unfit()
    if len(b) > MAX_VALUE_BYTES:
        raise ValueTooLarge(f"value of {len(b)} bytes exceeds the {MAX_VALUE_BYTES}-byte limit for {t.name}")
    return b


_OCTAL = re.compile(r"\\([0-3][0-7]{2}|\\)")


def bytea_in(text: str) -> bytes:
    """PostgreSQL's (and CockroachDB's) bytea text: ``\\x`` and hex digits, or the escape
    format, where ``\\\\`` is a backslash and ``\\nnn`` an octal byte; any other backslash is
    22P02, as bytea_in says."""
    if text.startswith(("\\x", "\\X")):
        digits = "".join(text[2:].split())
        try:
            return bytes.fromhex(digits)
        except ValueError:
            raise TextRejected(
                "invalid hexadecimal data: odd number of digits or a character that is not one"
            ) from None
    if "\\" not in text:
        return text.encode("utf-8")
    out = bytearray()
    pos = 0
    for m in _OCTAL.finditer(text):
        chunk = text[pos : m.start()]
        if "\\" in chunk:
            break
        out += chunk.encode("utf-8")
        out.append(0x5C if m.group(1) == "\\" else int(m.group(1), 8))
        pos = m.end()
    rest = text[pos:]
    if "\\" in rest:
        raise TextRejected("invalid input syntax for type bytea")
    return bytes(out + rest.encode("utf-8"))


def _c_date(t: SqlType, v: object) -> dt.date:
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        return read_date(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return EPOCH_DATE + dt.timedelta(days=v)
    raise _Unfit()


def _c_timestamp(t: SqlType, v: object) -> dt.datetime:
    if isinstance(v, dt.datetime):
        ts = v
    elif isinstance(v, dt.date):
        ts = dt.datetime(v.year, v.month, v.day)
    elif isinstance(v, str):
        ts = read_timestamp(v)
        if not t.zoned and ts.tzinfo is not None:
            # PostgreSQL and CockroachDB: TIMESTAMP '2024-01-31 10:11:12+05' is 10:11:12, the
            # offset of the text ignored (a zoned value, a datetime, converts instead)
            ts = ts.replace(tzinfo=None)
    elif isinstance(v, int) and not isinstance(v, bool):
        unit = 1000 if t.millis else (1 if t.kind is Kind.DATETIME else 1_000_000)
        ts = EPOCH + dt.timedelta(microseconds=v * (1_000_000 // unit))
    else:
        raise _Unfit()
    if t.zoned:
        ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    elif ts.tzinfo is not None:
        ts = ts.astimezone(UTC).replace(tzinfo=None)
    if t.kind is Kind.DATETIME:
        ts = ts.replace(microsecond=0)
    elif t.millis:
        ts = ts.replace(microsecond=ts.microsecond // 1000 * 1000)
    return ts


def _c_time(t: SqlType, v: object) -> dt.time:
    if isinstance(v, dt.time):
        return v
    if isinstance(v, str):
        return read_time(v)
    if isinstance(v, int) and not isinstance(v, bool):  # nanoseconds since midnight (CQL)
        us = v // 1000
        return (dt.datetime.min + dt.timedelta(microseconds=us)).time()
    raise _Unfit()


def _c_interval(t: SqlType, v: object) -> dt.timedelta | Interval:
    if isinstance(v, dt.timedelta | Interval):
        return v
    if isinstance(v, str):
        return parse_interval_value(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return dt.timedelta(microseconds=v)
    raise _Unfit()


def _c_json(t: SqlType, v: object) -> str:
    if isinstance(v, str):
        parsed = json_doc.loads(v)  # numbers exact: orjson would round them (see json_doc)
    elif isinstance(v, dict | list | int | float | bool | Decimal):
        parsed = v
    else:
        raise _Unfit()
    out = json_doc.JsonText(json_doc.dumps(parsed))
    if len(out) > MAX_VALUE_BYTES:
        raise ValueTooLarge(f"JSON value exceeds the {MAX_VALUE_BYTES}-byte limit")
    return out


def _c_uuid(t: SqlType, v: object) -> uuid.UUID:
    if isinstance(v, uuid.UUID):
        u = v
    elif isinstance(v, str):
        u = uuid.UUID(v.strip())
    elif isinstance(v, bytes) and len(v) == 16:
        u = uuid.UUID(bytes=v)
    else:
        raise _Unfit()
    if t.kind is Kind.TIMEUUID and u.version != 1:
        raise _Unfit("not a version 1 (time-based) UUID")
    return u


def _c_inet(t: SqlType, v: object) -> str:
    if not isinstance(v, str):
        raise _Unfit()
    s = v.strip()
    if "/" in s:
        return str(ipaddress.ip_interface(s))
    return str(ipaddress.ip_address(s))


def _c_bit(t: SqlType, v: object) -> str:
    if isinstance(v, str):
        s = v.strip()
    elif isinstance(v, bytes) and set(v) <= {0x30, 0x31}:  # B'101' literal
        s = v.decode()
    elif isinstance(v, int) and not isinstance(v, bool) and t.length:
        s = format(v, "b").zfill(t.length)
    else:
        raise _Unfit()
    if s.upper().startswith("B'") and s.endswith("'"):
        s = s[2:-1]
    if any(c not in "01" for c in s):
        raise _Unfit("bit strings contain only 0 and 1")
    if t.length is not None:
        if t.varying and len(s) > t.length:
            raise ValueTooLarge(f"bit string too long for type {t.name} ({len(s)} > {t.length})")
        if not t.varying and len(s) != t.length:
            raise TypeMismatch(f"bit string length {len(s)} does not match type {t.name}")
    return s


def _c_enum(t: SqlType, v: object) -> str:
    if isinstance(v, str) and v in t.labels:
        return v
    raise _Unfit()


def _c_array(t: SqlType, v: object) -> list[Any]:
    assert t.element is not None
    if isinstance(v, str):
        v = orjson.loads(v) if v.startswith("[") else _parse_pg_array(v)
    if not isinstance(v, list | tuple):
        raise _Unfit()
    element = t.element
    try:
        return [element.coerce(x, "array element") for x in v]
    except TypeMismatch:
        if any(isinstance(x, str) for x in v):
            raise  # a string that does not parse as the element type says so itself
        raise _Unfit() from None


def _parse_pg_array(s: str) -> list[str | None]:
    try:
        return array_from_text(s, None)
    except ValueError as exc:
        raise TextRejected(f"malformed array literal: {exc}") from None


_COERCE: dict[Kind, Any] = {
    Kind.BOOL: _c_bool,
    Kind.INT: _c_int,
    Kind.UINT: _c_int,
    Kind.VARINT: _c_int,
    Kind.FLOAT: _c_float,
    Kind.DECIMAL: _c_decimal,
    Kind.TEXT: _c_text,
    Kind.BYTES: _c_bytes,
    Kind.DATE: _c_date,
    Kind.DATETIME: _c_timestamp,
    Kind.TIMESTAMP: _c_timestamp,
    Kind.TIME: _c_time,
    Kind.INTERVAL: _c_interval,
    Kind.JSON: _c_json,
    Kind.UUID: _c_uuid,
    Kind.TIMEUUID: _c_uuid,
    Kind.INET: _c_inet,
    Kind.BIT: _c_bit,
    Kind.ENUM: _c_enum,
    Kind.ARRAY: _c_array,
}

# ====================================================================================== storage


def _ts_to_us(v: dt.datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    delta = v - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _us_to_ts(t: SqlType, us: int) -> dt.datetime:
    ts = EPOCH + dt.timedelta(microseconds=us)
    return ts if t.zoned else ts.replace(tzinfo=None)


def _td_to_us(v: dt.timedelta | Interval) -> int:
    if isinstance(v, Interval):
        raise UnsupportedFeature(
            f"an interval of months or years ({v}) cannot be stored: an INTERVAL column holds days"
            " and time only (write it in days, such as '30 days')"
        )
    return (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds


def _time_to_ns(v: dt.time) -> int:
    return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000_000 + v.microsecond * 1000


def _ns_to_time(ns: int) -> dt.time:
    return (dt.datetime.min + dt.timedelta(microseconds=ns // 1000)).time()


def _array_to_db(t: SqlType, v: list[Any]) -> str:
    assert t.element is not None
    el = t.element
    if el.kind is Kind.FLOAT:  # JSON has no NaN or infinities (orjson would write null): as text
        return orjson.dumps([_float_element(x) for x in v]).decode()
    return orjson.dumps([_json_safe(el.to_db(x)) for x in v]).decode()


def _float_element(x: Any) -> Any:
    """A FLOAT array element as stored: a number, or ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    (text every reader turns back with ``float()``, Spark's JSON reader too)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if x != x else "Infinity" if x > 0 else "-Infinity"
    return x


def _json_safe(x: Any) -> Any:
    if isinstance(x, bytes):
        return {"$b": x.hex()}
    return x


def _array_from_db(t: SqlType, raw: str) -> list[Any]:
    assert t.element is not None
    el = t.element
    out = []
    for x in orjson.loads(raw):
        if isinstance(x, dict) and "$b" in x:
            x = bytes.fromhex(x["$b"])
        out.append(el.from_db(x))
    return out


def _uint_to_db(t: SqlType, v: int) -> int:
    return v - UINT64_BIAS if t.bits == 64 else v


def _uint_from_db(t: SqlType, raw: int) -> int:
    return raw + UINT64_BIAS if t.bits == 64 else raw


def _varint_to_db(t: SqlType, v: int) -> int | str:
    return v if -(1 << 63) <= v < (1 << 63) else str(v)


def _ident(t: SqlType, v: Any) -> Any:
    return v


_TO_DB: dict[Kind, Any] = {
    Kind.BOOL: lambda t, v: 1 if v else 0,
    Kind.INT: _ident,
    Kind.UINT: _uint_to_db,
    Kind.VARINT: _varint_to_db,
    Kind.FLOAT: _ident,
    Kind.DECIMAL: lambda t, v: str(v),
    Kind.TEXT: _ident,
    Kind.BYTES: _ident,
    Kind.DATE: lambda t, v: (v - EPOCH_DATE).days,
    Kind.DATETIME: lambda t, v: _ts_to_us(v) // 1_000_000,
    Kind.TIMESTAMP: lambda t, v: _ts_to_us(v),
    Kind.TIME: lambda t, v: _time_to_ns(v),
    Kind.INTERVAL: lambda t, v: _td_to_us(v),
    Kind.JSON: _ident,
    Kind.UUID: lambda t, v: str(v),
    Kind.TIMEUUID: lambda t, v: str(v),
    Kind.INET: _ident,
    Kind.BIT: _ident,
    Kind.ENUM: _ident,
    Kind.ARRAY: _array_to_db,
}

_FROM_DB: dict[Kind, Any] = {
    Kind.BOOL: lambda t, r: bool(r),
    Kind.INT: _ident,
    Kind.UINT: _uint_from_db,
    Kind.VARINT: lambda t, r: int(r),
    Kind.FLOAT: lambda t, r: float(r),
    Kind.DECIMAL: lambda t, r: Decimal(r),
    Kind.TEXT: _ident,
    Kind.BYTES: lambda t, r: bytes(r),
    Kind.DATE: lambda t, r: EPOCH_DATE + dt.timedelta(days=r),
    Kind.DATETIME: lambda t, r: _us_to_ts(t, r * 1_000_000),
    Kind.TIMESTAMP: _us_to_ts,
    Kind.TIME: lambda t, r: _ns_to_time(r),
    Kind.INTERVAL: lambda t, r: dt.timedelta(microseconds=r),
    Kind.JSON: lambda t, r: json_doc.JsonText(r) if isinstance(r, str) else r,
    Kind.UUID: lambda t, r: uuid.UUID(r),
    Kind.TIMEUUID: lambda t, r: uuid.UUID(r),
    Kind.INET: _ident,
    Kind.BIT: _ident,
    Kind.ENUM: _ident,
    Kind.ARRAY: _array_from_db,
}


# ====================================================================================== names


# YDB names that are spelled in CamelCase: used to tell a YDB declaration from a CockroachDB one
# in the shared ``sql`` dialect (``String`` is YDB bytes, ``STRING`` is CockroachDB text).
_YDB_NAMES = YDB_SPELLINGS


def is_ydb_type(t: SqlType) -> bool:
    """Whether ``t`` was declared with a YDB spelling (``Utf8``, ``Int64``, ``Decimal(22,9)``...):
    how the shared ``sql`` dialect tells a YDB table from a CockroachDB one."""
    if t.element is not None:
        return is_ydb_type(t.element)
    return t.name.split("(", 1)[0] in _YDB_NAMES
