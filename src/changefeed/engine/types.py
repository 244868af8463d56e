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
import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_from_text
from changefeed.engine.intervals import Interval, parse_calendar
from changefeed.engine.type_errors import YDB_SPELLINGS, mismatch, out_of_range, voice_of
from changefeed.exceptions import (
    DatetimeFieldOverflow,
    NumericValueOutOfRange,
    TypeMismatch,
    UndefinedObject,
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
            raise self._mismatch(value, what, exc.reason if isinstance(exc, _Bad) else "") from None

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


class _Bad(ValueError):
    """A parse helper's ValueError whose text is ours (safe to show)."""

    def __init__(self, reason: str) -> None:
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
        v = int(v.strip())
    if not isinstance(v, int):
        raise _Unfit()
    if t.kind is not Kind.VARINT:
        lo, hi = _int_range(t)
        if not lo <= v <= hi:
            raise out_of_range(t.kind.value, t.name, v, f"{lo}..{hi}")
    return v


def _c_float(t: SqlType, v: object) -> float:
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
        f = float(v)
        if math.isinf(f) and v.strip().lower().lstrip("+-") not in _INFINITY_SPELLINGS:
            raise _out_of_float_range(v)
        return f
    raise _Unfit()


#: How a string may name an infinity (``float()`` also reads them; a huge number is not one).
_INFINITY_SPELLINGS = frozenset({"inf", "infinity"})


def _out_of_float_range(text: str) -> NumericValueOutOfRange:
    """PostgreSQL's error for a number past double precision's range (``1e400``), not Infinity."""
    return NumericValueOutOfRange(f'"{text.strip()}" is out of range for type double precision')


def _c_decimal(t: SqlType, v: object) -> Decimal:
    if isinstance(v, bool):
        raise _Unfit()
    if isinstance(v, float):
        d = Decimal(repr(v))
    elif isinstance(v, int | Decimal):
        d = Decimal(v)
    elif isinstance(v, str):
        d = Decimal(v.strip())
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
        b = v.encode("utf-8")
    else:
        raise _Unfit()
    if len(b) > MAX_VALUE_BYTES:
        raise ValueTooLarge(f"value of {len(b)} bytes exceeds the {MAX_VALUE_BYTES}-byte limit for {t.name}")
    return b


def _c_date(t: SqlType, v: object) -> dt.date:
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        s = v.strip()
        try:
            return dt.date.fromisoformat(s)
        except ValueError:
            if _DATE_SHAPE.match(s):  # well formed, a field out of range (2024-02-30)
                raise _field_out_of_range(s) from None
            raise
    if isinstance(v, int) and not isinstance(v, bool):
        return EPOCH_DATE + dt.timedelta(days=v)
    raise _Unfit()


_DATE_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_SHAPE = re.compile(r"^\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$")


def _field_out_of_range(text: str) -> DatetimeFieldOverflow:
    """PostgreSQL's 22008 for a well-formed date or time whose field is out of range."""
    return DatetimeFieldOverflow(f'date/time field value out of range: "{text}"')


_TS_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$", re.I
)


def parse_timestamp(s: str) -> dt.datetime:
    s = s.strip()
    if not _TS_RE.match(s):
        raise _Bad("not an ISO 8601 timestamp")
    s2 = s.replace("z", "Z")
    if s2.endswith("Z"):
        s2 = s2[:-1] + "+00:00"
    m = re.match(r"^(.*\.\d{6})\d+(.*)$", s2)  # truncate nanoseconds to microseconds
    if m:
        s2 = m.group(1) + m.group(2)
    m = re.match(r"^(.*[+-]\d{2})(\d{2})$", s2)  # +0000 -> +00:00
    if m and ":" not in s2[-5:]:
        s2 = m.group(1) + ":" + m.group(2)
    return dt.datetime.fromisoformat(s2)


def _c_timestamp(t: SqlType, v: object) -> dt.datetime:
    if isinstance(v, dt.datetime):
        ts = v
    elif isinstance(v, dt.date):
        ts = dt.datetime(v.year, v.month, v.day)
    elif isinstance(v, str):
        try:
            ts = parse_timestamp(v)
        except _Bad:
            raise
        except ValueError:  # well formed (parse_timestamp checked), a field out of range
            raise _field_out_of_range(v.strip()) from None
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
        s = v.strip()
        try:
            return dt.time.fromisoformat(s)
        except ValueError:
            if _TIME_SHAPE.match(s):  # well formed, a field out of range (24:00:01)
                raise _field_out_of_range(s) from None
            raise
    if isinstance(v, int) and not isinstance(v, bool):  # nanoseconds since midnight (CQL)
        us = v // 1000
        return (dt.datetime.min + dt.timedelta(microseconds=us)).time()
    raise _Unfit()


_ISO_DUR = re.compile(
    r"^(?P<sign>-)?P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.I,
)
_PG_DUR = re.compile(r"(?P<n>-?\d+(?:\.\d+)?)\s*(?P<u>[a-zµ]+)", re.I)
_UNITS_US = {
    "us": 1, "µs": 1, "microsecond": 1, "microseconds": 1,
    "ms": 1000, "millisecond": 1000, "milliseconds": 1000,
    "s": 1_000_000, "sec": 1_000_000, "secs": 1_000_000, "second": 1_000_000, "seconds": 1_000_000,
    "m": 60_000_000, "min": 60_000_000, "mins": 60_000_000, "minute": 60_000_000, "minutes": 60_000_000,
    "h": 3_600_000_000, "hr": 3_600_000_000, "hour": 3_600_000_000, "hours": 3_600_000_000,
    "d": 86_400_000_000, "day": 86_400_000_000, "days": 86_400_000_000,
    "w": 604_800_000_000, "week": 604_800_000_000, "weeks": 604_800_000_000,
}  # fmt: skip


def parse_interval(s: str) -> dt.timedelta:
    """ISO 8601 durations (``PT24H``, ``P1D``), Go/CockroachDB style (``10s``, ``1h30m``) and
    PostgreSQL style (``1 day 2 hours``), and ``HH:MM:SS``."""
    s = s.strip()
    m = _ISO_DUR.match(s)
    if m and s.upper() not in ("P", "PT", "-P"):
        us = 0
        for g, mult in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60)):
            if m.group(g):
                us += int(m.group(g)) * mult * 1_000_000
        if m.group("s"):
            us += int(Decimal(m.group("s")) * 1_000_000)
        return dt.timedelta(microseconds=-us if m.group("sign") else us)
    hms = re.match(r"^(-)?(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$", s)
    if hms:
        us = int(hms.group(2)) * 3_600_000_000 + int(hms.group(3)) * 60_000_000
        us += int(Decimal(hms.group(4)) * 1_000_000)
        return dt.timedelta(microseconds=-us if hms.group(1) else us)
    pos, us_total = 0, 0
    compact = s.replace(" ", "")
    if compact:
        for part in _PG_DUR.finditer(s):
            unit = part.group("u").lower()
            if unit not in _UNITS_US:
                raise _Bad(f'interval: unknown unit "{unit}"')
            us_total += int(Decimal(part.group("n")) * _UNITS_US[unit])
            pos += len(part.group(0).replace(" ", ""))
        if pos == len(compact):
            return dt.timedelta(microseconds=us_total)
    raise _Bad("interval: missing unit")


def parse_interval_value(s: str) -> dt.timedelta | Interval:
    """An interval's text as a value: :func:`parse_interval`'s forms, and PostgreSQL's with
    months and years (``'1 month'``, ``'1 year 2 mons 3 days 04:05:06'``: an
    :class:`~changefeed.engine.intervals.Interval`)."""
    cal = parse_calendar(s)
    if isinstance(cal, Interval):
        return cal
    try:
        return parse_interval(s)
    except _Bad:
        if cal is not None:  # PostgreSQL's own output form, such as '1 day 02:00:00'
            return cal
        raise


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
    out = json_doc.dumps(parsed)
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
        raise _Bad(f"malformed array literal: {exc}") from None


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
    Kind.JSON: _ident,
    Kind.UUID: lambda t, r: uuid.UUID(r),
    Kind.TIMEUUID: lambda t, r: uuid.UUID(r),
    Kind.INET: _ident,
    Kind.BIT: _ident,
    Kind.ENUM: _ident,
    Kind.ARRAY: _array_from_db,
}


# ====================================================================================== names


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

# YDB names that are spelled in CamelCase: used to tell a YDB declaration from a CockroachDB one
# in the shared ``sql`` dialect (``String`` is YDB bytes, ``STRING`` is CockroachDB text).
_YDB_SPELLINGS = YDB_SPELLINGS
_YDB_NAMES = frozenset({t.name for t in _SIMPLE.values()} | {"Decimal"})


def is_ydb_type(t: SqlType) -> bool:
    """Whether ``t`` was declared with a YDB spelling (``Utf8``, ``Int64``, ``Decimal(22,9)``...):
    how the shared ``sql`` dialect tells a YDB table from a CockroachDB one."""
    if t.element is not None:
        return is_ydb_type(t.element)
    return t.name.split("(", 1)[0] in _YDB_NAMES


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
        raise UndefinedObject(f'type "{name}" does not exist')
    if name in _YDB_SPELLINGS or (key in _SIMPLE and key not in _CRDB):
        return _SIMPLE[key]
    if key in _CRDB:
        return _CRDB[key]
    if key in _SIMPLE:
        return _SIMPLE[key]
    if key in enums:
        return SqlType(kind=Kind.ENUM, name=name, labels=enums[key])
    raise UndefinedObject(f'type "{name}" does not exist')
