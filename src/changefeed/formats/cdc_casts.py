"""Values of CDC query expressions in both evaluators, and CockroachDB's casts between types.

The Python face (:mod:`changefeed.formats.cdc_eval`) works on plain Python values, one domain
per type; the Spark face on Spark columns of the Arrow type the change stream carries
(:func:`changefeed.engine.changes.arrow_type`):

=============  ==================================  ======================================
type           Python domain                        Spark column
=============  ==================================  ======================================
INT            int                                  bigint
FLOAT          float                                double
DECIMAL(p,s)   Decimal                              decimal(p,s)
DECIMAL        Decimal                              string (apd text)
STRING, UUID,  str                                  string
ENUM, INET
BOOL           bool                                 boolean
BYTES          bytes                                binary
DATE           int (days since 1970-01-01)          date
TIMESTAMP[TZ]  int (microseconds since the epoch)   timestamp (UTC)
TIME           int (nanoseconds since midnight)     bigint
INTERVAL       int (microseconds)                   bigint
JSONB          str (JSON text)                      string
=============  ==================================  ======================================

Casts follow CockroachDB: ``x::STRING`` prints as ``SELECT x::STRING`` does (TIMESTAMPTZ
``2019-01-02 03:04:05.5+00``, FLOAT Go's ``%g`` shortest ``1e+06``, BYTES ``\\x0102``...),
FLOAT and DECIMAL to INT round (FLOAT half to even, DECIMAL half away from zero), strings parse
with CockroachDB's error texts. A cast that fails at run time fails the changefeed (CockroachDB
marks expression errors terminal).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from changefeed.engine import json_doc
from changefeed.engine.temporal_text import parse_interval, parse_timestamp
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedFailed, TypeMismatch
from changefeed.feeds.cdc_plan import is_canonical_json
from changefeed.formats import crdb_values as V

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

#: A decimal context wide enough for any value CockroachDB's DECIMAL holds exactly here.
WIDE = decimal.Context(prec=200, Emax=999_999, Emin=-999_999)
US = 1_000_000
US_PER_DAY = 86_400 * US
EPOCH = dt.datetime(1970, 1, 1)

# ============================================================================ names of types


def type_family(t: SqlType) -> str:
    """CockroachDB's family name of ``t`` as its operator errors print it (``<int>``)."""
    k = t.kind
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return "int"
    if k is Kind.TIMESTAMP:
        return "timestamptz" if t.zoned else "timestamp"
    return {
        Kind.FLOAT: "float",
        Kind.DECIMAL: "decimal",
        Kind.TEXT: "string",
        Kind.BOOL: "bool",
        Kind.BYTES: "bytes",
        Kind.DATE: "date",
        Kind.TIME: "time",
        Kind.INTERVAL: "interval",
        Kind.JSON: "jsonb",
        Kind.UUID: "uuid",
        Kind.INET: "inet",
        Kind.BIT: "varbit",
        Kind.ENUM: t.name.lower(),
        Kind.ARRAY: (type_family(t.element) + "[]") if t.element is not None else "anyarray",
    }.get(k, str(k.value))


def pg_type_name(t: SqlType) -> str:
    """``pg_typeof(x)``: PostgreSQL's name of ``t`` (``bigint``, ``text``, ``numeric``...)."""
    k = t.kind
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return {16: "smallint", 32: "integer"}.get(t.bits, "bigint")
    if k is Kind.FLOAT:
        return "real" if t.bits == 32 else "double precision"
    if k is Kind.TIMESTAMP:
        return "timestamp with time zone" if t.zoned else "timestamp without time zone"
    if k is Kind.TEXT:
        return "character varying" if t.name.upper().startswith("VARCHAR") else "text"
    if k is Kind.ARRAY and t.element is not None:
        return pg_type_name(t.element) + "[]"
    return {
        Kind.DECIMAL: "numeric",
        Kind.BOOL: "boolean",
        Kind.BYTES: "bytea",
        Kind.DATE: "date",
        Kind.TIME: "time without time zone",
        Kind.INTERVAL: "interval",
        Kind.JSON: "jsonb",
        Kind.UUID: "uuid",
        Kind.INET: "inet",
        Kind.BIT: "bit varying",
        Kind.ENUM: t.name.lower(),
    }.get(k, t.name.lower())


def spark_type(t: SqlType) -> str:
    """The Spark SQL type of a value of ``t`` (the type of its change-stream column)."""
    k = t.kind
    if k is Kind.BOOL:
        return "boolean"
    if k in (Kind.INT, Kind.TIME, Kind.INTERVAL):
        return "bigint"
    if k is Kind.UINT:
        return "decimal(20,0)" if t.bits == 64 else "bigint"
    if k is Kind.FLOAT:
        return "double"
    if k is Kind.DECIMAL:
        return f"decimal({t.precision},{t.scale or 0})" if t.precision is not None else "string"
    if k is Kind.BYTES:
        return "binary"
    if k is Kind.DATE:
        return "date"
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return "timestamp"
    return "string"


# ============================================================================ Arrow <-> Python domain


def from_arrow(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> list[Any]:
    """One change-stream column (of ``arrow_type(t)``) as Python domain values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    k = t.kind
    if k is Kind.DATE:
        return arr.cast(pa.int32()).to_pylist()  # type: ignore[no-any-return]
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return pc.cast(arr, pa.int64()).to_pylist()  # type: ignore[no-any-return]
    values = arr.to_pylist()
    if k is Kind.DECIMAL and t.precision is None:
        return [None if v is None else Decimal(v) for v in values]
    return values  # type: ignore[no-any-return]


def to_arrow(values: list[Any], t: SqlType) -> pa.Array:
    """Python domain values as an Arrow array of ``arrow_type(t)`` (what the encoders read)."""
    import pyarrow as pa

    from changefeed.engine.changes import arrow_type

    k = t.kind
    at = arrow_type(t)
    if k is Kind.DATE:
        return pa.array(values, pa.int32()).cast(at)
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return pa.array(values, pa.int64()).cast(at)
    if k is Kind.DECIMAL:
        if t.precision is None:
            return pa.array([None if v is None else decimal_string(v) for v in values], pa.string())
        return pa.array(values, at)
    if k is Kind.JSON and not is_canonical_json(t):
        return pa.array(values, pa.string())
    return pa.array(values, at)


def decimal_string(d: Decimal) -> str:
    """apd's text of a decimal (CockroachDB's ``DECIMAL::STRING``)."""
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "Infinity" if d > 0 else "-Infinity"
    if d.is_zero() and d.is_signed():
        d = d.copy_abs()  # no negative zero (the Spark face's decimals have none)
    return str(d)


# ============================================================================ texts (::STRING)


def go_float(x: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 64)``: CockroachDB's ``FLOAT::STRING`` (the
    shortest round-trip digits; exponent form below 1e-4 and from 1e+06 on)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    digits, exp = shortest_digits(x)
    sign = "-" if x < 0 else ""
    if exp < -4 or exp >= GO_EXP_FORM:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


#: Go's shortest ``%g`` switches to the exponent form at this decimal exponent ("if precision
#: was the shortest possible, use precision 6 for this decision").
GO_EXP_FORM = 6


def shortest_digits(x: float) -> tuple[str, int]:
    """The shortest round-trip digits of ``|x|`` (no trailing zeros) and the decimal exponent
    of the first digit: 1234.5 -> ("12345", 3), 0.001 -> ("1", -3)."""
    _, ds, e = Decimal(repr(abs(x))).as_tuple()
    assert isinstance(e, int)
    raw = "".join(str(i) for i in ds)
    digits = raw.lstrip("0") or "0"
    return digits.rstrip("0") or "0", len(raw) + e - 1 - (len(raw) - len(digits))


def timestamp_string(us: int, zoned: bool) -> str:
    text = V.timestamp_text(us, zoned)[1:-1].replace("T", " ")
    return text[:-1] + "+00" if zoned else text


def text_of(v: Any, t: SqlType) -> str:
    """``v::STRING`` for a Python domain value of type ``t``."""
    k = t.kind
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return str(v)
    if k is Kind.FLOAT:
        return go_float(v)
    if k is Kind.DECIMAL:
        return decimal_string(v)
    if k is Kind.BOOL:
        return "true" if v else "false"
    if k is Kind.BYTES:
        return "\\x" + bytes(v).hex()
    if k is Kind.DATE:
        return (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return timestamp_string(v, t.zoned or k is Kind.DATETIME)
    if k is Kind.TIME:
        return V.time_text(v)[1:-1]
    if k is Kind.INTERVAL:
        return V.interval_text(v)[1:-1]
    if k is Kind.JSON:
        return v if is_canonical_json(t) else V.json_document(json_doc.loads(v))
    return str(v)


def json_text(v: Any, t: SqlType) -> str:
    """A Python domain value as CockroachDB's JSON text (``to_json``, ``jsonb_build_object``,
    the encoders' rendering)."""
    if v is None:
        return V.NULL
    k = t.kind
    if k is Kind.BOOL:
        return "true" if v else "false"
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return str(v)
    if k is Kind.FLOAT:
        return V.float_text(v)
    if k is Kind.DECIMAL:
        return V.decimal_text(v)
    if k is Kind.BYTES:
        return '"\\\\x' + bytes(v).hex() + '"'
    if k is Kind.DATE:
        return '"' + text_of(v, t) + '"'
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        return V.timestamp_text(v, t.zoned or k is Kind.DATETIME)
    if k is Kind.TIME:
        return V.time_text(v)
    if k is Kind.INTERVAL:
        return V.interval_text(v)
    if k is Kind.JSON:
        return v if is_canonical_json(t) else V.json_document(json_doc.loads(v))
    if k is Kind.ARRAY:
        return V.storage_text(v, t)
    return V.json_string(str(v))


def spark_text(c: Column, t: SqlType) -> Column:
    """``c::STRING`` on Spark (:func:`text_of`)."""
    from pyspark.sql import functions as F

    k = t.kind
    if k in (Kind.INT, Kind.UINT, Kind.VARINT, Kind.TEXT, Kind.UUID, Kind.ENUM, Kind.INET, Kind.BIT):
        return c.cast("string")
    if k is Kind.FLOAT:
        return spark_go_float(c)
    if k is Kind.DECIMAL:
        if t.precision is None:
            return c
        return F.when(c.isNotNull(), V.spark_value(c, t))  # apd's text, unquoted in JSON too
    if k is Kind.BOOL:
        return F.when(c, F.lit("true")).when(~c, F.lit("false"))
    if k is Kind.BYTES:
        return F.concat(F.lit("\\x"), F.lower(F.hex(c)))
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        body = F.replace(_unquote(V.spark_value(c, t)), F.lit("T"), F.lit(" "))
        if t.zoned or k is Kind.DATETIME:
            body = F.concat(F.substring(body, 1, F.length(body) - 1), F.lit("+00"))
        return F.when(c.isNotNull(), body)
    if k in (Kind.DATE, Kind.TIME, Kind.INTERVAL):
        return F.when(c.isNotNull(), _unquote(V.spark_value(c, t)))
    if k is Kind.JSON:
        return c if is_canonical_json(t) else F.when(c.isNotNull(), V.spark_value(c, t))
    return c.cast("string")


def spark_json(c: Column, t: SqlType) -> Column:
    """:func:`json_text` on Spark (never NULL: SQL NULL is ``null``)."""
    from pyspark.sql import functions as F

    if is_canonical_json(t):
        return F.coalesce(c, F.lit(V.NULL))
    return V.spark_value(c, t)


def _unquote(c: Column) -> Column:
    from pyspark.sql import functions as F

    return F.substring(c, F.lit(2), F.length(c) - F.lit(2))


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once (Spark would otherwise copy the expression
    into every place ``body`` uses it)."""
    from pyspark.sql import functions as F

    return F.element_at(F.transform(F.array(value), body), 1)


def spark_go_float(c: Column) -> Column:
    """:func:`go_float` on Spark, from the shortest digits (Java's ``Double.toString`` digits
    through Schubfach, as :mod:`changefeed.formats.crdb_values` reads them)."""
    from pyspark.sql import functions as F

    shortest = F.reflect(
        F.lit("com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal"),
        F.lit("toString"),
        F.abs(F.coalesce(c, F.lit(1.0))),
    )
    return let(F.struct(c.alias("c"), shortest.alias("s")), lambda v: _go_float_of(v["c"], v["s"]))


def _go_float_of(c: Column, full: Column) -> Column:
    from pyspark.sql import functions as F

    mant = F.substring_index(full, "E", 1)
    has_e = F.contains(full, F.lit("E"))
    e10 = F.when(has_e, F.substring_index(full, "E", -1).cast("int")).otherwise(F.lit(0))
    ip = F.substring_index(mant, ".", 1)
    fp = F.when(F.contains(mant, F.lit(".")), F.substring_index(mant, ".", -1)).otherwise(F.lit(""))
    raw = F.concat(ip, fp)
    stripped = F.ltrim(raw, F.lit("0"))
    lead_zeros = F.length(raw) - F.length(stripped)
    digits = F.rtrim(stripped, F.lit("0"))
    digits = F.when(digits == "", F.lit("0")).otherwise(digits)
    exp = e10 + F.length(ip) - lead_zeros - F.lit(1)
    n = F.length(digits)
    sign = F.when(c < 0, F.lit("-")).otherwise(F.lit(""))
    sci = F.concat(
        sign,
        F.substr(digits, F.lit(1), F.lit(1)),
        F.when(n > 1, F.concat(F.lit("."), F.substr(digits, F.lit(2)))).otherwise(F.lit("")),
        F.lit("e"),
        F.when(exp < 0, F.lit("-")).otherwise(F.lit("+")),
        F.lpad(F.abs(exp).cast("string"), 2, "0"),
    )
    point = exp + F.lit(1)
    plain = (
        F.when(point <= 0, F.concat(sign, F.lit("0."), F.repeat(F.lit("0"), -point), digits))
        .when(point >= n, F.concat(sign, digits, F.repeat(F.lit("0"), point - n)))
        .otherwise(F.concat(sign, F.substr(digits, F.lit(1), point), F.lit("."), F.substr(digits, point + 1)))
    )
    neg_zero = F.lit(1.0) / c < F.lit(0.0)
    return (
        F.when(c.isNull(), F.lit(None))
        .when(F.isnan(c), F.lit("NaN"))
        .when(c == F.lit(float("inf")), F.lit("+Inf"))
        .when(c == F.lit(float("-inf")), F.lit("-Inf"))
        .when(c == 0, F.when(neg_zero, F.lit("-0")).otherwise(F.lit("0")))
        .when((exp < -4) | (exp >= GO_EXP_FORM), sci)
        .otherwise(plain)
    )


def quote_literal(s: str) -> str:
    """CockroachDB's ``quote_literal``: ``'it''s'``; with a backslash, an escape string
    ``e'a\\b'``."""
    if "\\" in s:
        return "e'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + s.replace("'", "''") + "'"


def quote_ident(s: str) -> str:
    """``quote_ident``/``format('%I')``: bare when a lower-case identifier, else double-quoted."""
    import re

    return s if re.fullmatch(r"[a-z_][a-z0-9_]*", s) else '"' + s.replace('"', '""') + '"'


def spark_quote_literal(s: Column) -> Column:
    from pyspark.sql import functions as F

    escaped = F.concat(
        F.lit("e'"), F.replace(F.replace(s, F.lit("\\"), F.lit("\\\\")), F.lit("'"), F.lit("\\'")), F.lit("'")
    )
    plain = F.concat(F.lit("'"), F.replace(s, F.lit("'"), F.lit("''")), F.lit("'"))
    return F.when(F.contains(s, F.lit("\\")), escaped).otherwise(plain)


def spark_quote_ident(s: Column) -> Column:
    from pyspark.sql import functions as F

    quoted = F.concat(F.lit('"'), F.replace(s, F.lit('"'), F.lit('""')), F.lit('"'))
    return F.when(s.rlike("^[a-z_][a-z0-9_]*$"), s).otherwise(quoted)


# ============================================================================ parsing strings

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


def _parse_error(s: str, type_name: str, why: str = "") -> ChangefeedFailed:
    return ChangefeedFailed(f'could not parse "{s}" as type {type_name}' + (f": {why}" if why else ""))


def parse_text(s: str, t: SqlType) -> Any:
    """A string cast to ``t`` (CockroachDB's ``'..'::T``), as a Python domain value."""
    k = t.kind
    try:
        if k in (Kind.INT, Kind.UINT):
            try:
                return int(s.strip(), 10)
            except ValueError:
                raise _parse_error(s, "int", f'strconv.ParseInt: parsing "{s}": invalid syntax') from None
        if k is Kind.FLOAT:
            try:
                return float(s.strip())
            except ValueError:
                raise _parse_error(s, "float", f'strconv.ParseFloat: parsing "{s}": invalid syntax') from None
        if k is Kind.DECIMAL:
            try:
                d = Decimal(s.strip())
            except InvalidOperation:
                raise _parse_error(s, "decimal") from None
            return quantize(d, t)
        if k is Kind.BOOL:
            low = s.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ChangefeedFailed(f'could not parse "{s}" as type bool: invalid bool value')
        if k is Kind.UUID:
            try:
                return str(uuid.UUID(s.strip()))
            except ValueError:
                raise ChangefeedFailed(
                    f'could not parse "{s}" as type uuid: uuid: incorrect UUID length: {s}'
                ) from None
        if k is Kind.DATE:
            try:
                return (dt.date.fromisoformat(s.strip()[:10]) - dt.date(1970, 1, 1)).days
            except ValueError:
                raise _parse_error(s, "date") from None
        if k is Kind.TIMESTAMP:
            ts = parse_timestamp(s.strip())
            if ts.tzinfo is None:
                ts = ts.replace(tzinfo=dt.UTC)
            delta = ts - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            return (delta.days * 86_400 + delta.seconds) * US + delta.microseconds
        if k is Kind.INTERVAL:
            iv = parse_interval(s.strip())
            return (iv.days * 86_400 + iv.seconds) * US + iv.microseconds
        if k is Kind.JSON:
            try:
                return V.json_document(json_doc.loads(s))
            except ValueError:
                raise ChangefeedFailed(f"could not parse JSON: {s}") from None
        if k is Kind.BYTES:
            if s.startswith("\\x"):
                return bytes.fromhex(s[2:])
            return s.encode()
        if k is Kind.ENUM:
            if s not in t.labels:
                raise ChangefeedFailed(f'invalid input value for enum {t.name.lower()}: "{s}"')
            return s
        if k is Kind.TEXT:
            return truncate(s, t)
    except (ValueError, TypeMismatch) as e:
        if isinstance(e, ChangefeedFailed):
            raise
        raise _parse_error(s, type_family(t)) from None
    return s


def truncate(s: str, t: SqlType) -> str:
    """An explicit cast to ``VARCHAR(n)``/``STRING(n)`` keeps the first ``n`` characters."""
    return s[: t.length] if t.length is not None and t.length >= 0 else s


def quantize(d: Decimal, t: SqlType) -> Decimal:
    """``d::DECIMAL(p,s)``: rounded half away from zero to ``s`` places, checked against ``p``."""
    if t.precision is None or not d.is_finite():
        return d
    q = d.quantize(Decimal(1).scaleb(-(t.scale or 0)), rounding=ROUND_HALF_UP, context=WIDE)
    if q.adjusted() >= t.precision - (t.scale or 0):
        raise ChangefeedFailed(
            f"value with precision {t.precision}, scale {t.scale or 0} must round to an absolute "
            f"value less than 10^{t.precision - (t.scale or 0)}"
        )
    return q


# ============================================================================ casts

INT_RANGE = (-(1 << 63), (1 << 63) - 1)


def _int_checked(v: int, t: SqlType) -> int:
    bits = t.bits if t.kind is Kind.INT else 64
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise ChangefeedFailed(
            "integer out of range" if bits == 64 else f"integer out of range for type int{bits // 8}"
        )
    return v


def cast_py(src: SqlType, dst: SqlType) -> Callable[[Any], Any]:
    """The Python face of ``::dst`` from ``src`` (NULL maps to NULL)."""
    s, d = src.kind, dst.kind
    if d is Kind.TEXT:
        return lambda v: truncate(text_of(v, src), dst)
    if s is Kind.TEXT or (s is Kind.ENUM and d is not Kind.ENUM):
        return lambda v: parse_text(v, dst)
    if d in (Kind.INT, Kind.UINT):
        if s is Kind.FLOAT:
            return lambda v: _int_checked(_round_even(v), dst)
        if s is Kind.DECIMAL:
            return lambda v: _int_checked(
                int(v.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=WIDE)), dst
            )
        if s is Kind.BOOL:
            return lambda v: 1 if v else 0
        return lambda v: _int_checked(int(v), dst)
    if d is Kind.FLOAT:
        return lambda v: float(v)
    if d is Kind.DECIMAL:
        if s is Kind.FLOAT:
            return lambda v: quantize(Decimal(repr(v)) if math.isfinite(v) else Decimal(str(v)), dst)
        return lambda v: quantize(Decimal(v), dst)
    if d is Kind.BOOL:
        return lambda v: v != 0
    if d is Kind.TIMESTAMP and s is Kind.DATE:
        return lambda v: v * US_PER_DAY
    if d is Kind.DATE and s is Kind.TIMESTAMP:
        return lambda v: v // US_PER_DAY
    if d is Kind.JSON:
        return lambda v: json_text(v, src)
    if d is Kind.BYTES and s is Kind.UUID:
        return lambda v: uuid.UUID(v).bytes
    if d is Kind.INTERVAL and s in (Kind.INT, Kind.UINT):
        return lambda v: v * US
    return lambda v: v


def _round_even(x: float) -> int:
    if not math.isfinite(x):
        raise ChangefeedFailed("integer out of range")
    return int(Decimal(repr(x)).quantize(Decimal(1), rounding=ROUND_HALF_EVEN, context=WIDE))


def castable(src: SqlType, dst: SqlType) -> bool:
    """Whether CockroachDB has a cast from ``src`` to ``dst``."""
    s, d = src.kind, dst.kind
    if s is d or d is Kind.TEXT or s is Kind.TEXT:
        return not (s is Kind.ARRAY and d is not Kind.TEXT)
    num = (Kind.INT, Kind.UINT, Kind.FLOAT, Kind.DECIMAL)
    if s in num and d in num:
        return True
    pairs = {
        (Kind.BOOL, Kind.INT),
        (Kind.INT, Kind.BOOL),
        (Kind.FLOAT, Kind.BOOL),
        (Kind.DECIMAL, Kind.BOOL),
        (Kind.DATE, Kind.TIMESTAMP),
        (Kind.TIMESTAMP, Kind.DATE),
        (Kind.UUID, Kind.BYTES),
        (Kind.INT, Kind.INTERVAL),
        (Kind.ENUM, Kind.TEXT),
    }
    if d is Kind.JSON:
        return s is not Kind.ARRAY
    return (s, d) in pairs


def cast_spark(c: Column, src: SqlType, dst: SqlType) -> Column:
    """The Spark face of ``::dst`` from ``src``."""
    from pyspark.sql import functions as F

    s, d = src.kind, dst.kind
    if d is Kind.TEXT:
        out = spark_text(c, src)
        return F.substring(out, 1, dst.length) if dst.length is not None and dst.length >= 0 else out
    if s is Kind.TEXT:
        return _spark_parse(c, dst)
    if d in (Kind.INT, Kind.UINT):
        if s is Kind.FLOAT:
            return F.bround(c, 0).cast("bigint")
        if s is Kind.DECIMAL:
            dec = c if src.precision is not None else c.cast("decimal(38,10)")
            return F.round(dec, 0).cast("bigint")
        if s is Kind.BOOL:
            return F.when(c, F.lit(1)).when(~c, F.lit(0)).cast("bigint")
        return c.cast("bigint")
    if d is Kind.FLOAT:
        return c.cast("double")
    if d is Kind.DECIMAL:
        if dst.precision is None:
            if s in (Kind.INT, Kind.UINT):
                return c.cast("string")
            if s is Kind.DECIMAL:
                return spark_text(c, src)
            return F.lit(None).cast("string")
        dec = c if s is not Kind.DECIMAL or src.precision is not None else c.cast("decimal(38,18)")
        return F.round(dec.cast("decimal(38,18)") if s is Kind.FLOAT else dec, dst.scale or 0).cast(
            spark_type(dst)
        )
    if d is Kind.BOOL:
        return c != 0
    if d is Kind.TIMESTAMP and s is Kind.DATE:
        return F.to_timestamp(c)
    if d is Kind.DATE and s is Kind.TIMESTAMP:
        return F.to_date(c)
    if d is Kind.JSON:
        return F.when(c.isNotNull(), spark_json(c, src))
    if d is Kind.INTERVAL and s in (Kind.INT, Kind.UINT):
        return c * F.lit(US)
    return c


def _spark_parse(c: Column, t: SqlType) -> Column:
    from pyspark.sql import functions as F

    k = t.kind
    if k in (Kind.INT, Kind.UINT):
        return F.trim(c).cast("bigint")
    if k is Kind.FLOAT:
        return F.trim(c).cast("double")
    if k is Kind.DECIMAL:
        if t.precision is None:
            return F.trim(c)
        return F.round(F.trim(c).cast("decimal(38,18)"), t.scale or 0).cast(spark_type(t))
    if k is Kind.BOOL:
        low = F.lower(F.trim(c))
        return F.when(low.isin(*_TRUE), F.lit(True)).when(low.isin(*_FALSE), F.lit(False))
    if k is Kind.UUID:
        return F.lower(F.trim(c))
    if k is Kind.DATE:
        return F.to_date(F.substring(F.trim(c), 1, 10))
    if k is Kind.TIMESTAMP:
        return F.to_timestamp(F.trim(c))
    if k is Kind.JSON:
        return F.when(c.isNotNull(), V.spark_value(c, t))
    if k is Kind.BYTES:
        return F.when(F.startswith(c, F.lit("\\x")), F.unhex(F.substr(c, F.lit(3)))).otherwise(
            F.encode(c, "UTF-8")
        )
    return c


__all__ = [
    "cast_py",
    "cast_spark",
    "castable",
    "decimal_string",
    "from_arrow",
    "go_float",
    "json_text",
    "let",
    "parse_text",
    "pg_type_name",
    "quantize",
    "quote_ident",
    "quote_literal",
    "spark_go_float",
    "spark_json",
    "spark_quote_ident",
    "spark_quote_literal",
    "spark_text",
    "spark_type",
    "text_of",
    "timestamp_string",
    "to_arrow",
    "type_family",
]
