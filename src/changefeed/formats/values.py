"""How a column value renders as JSON text, in Spark and in Python, byte for byte the same.

Both faces produce the JSON *text* of each value (``"null"`` for SQL NULL), and the encoders
assemble records by concatenating texts. Conventions (YDB's JSON changefeed rendering):

===================  ================================================================
type                 JSON
===================  ================================================================
Bool                 ``true`` / ``false``
Int*, Uint*          number (Uint64 travels as ``decimal(20,0)``: printed without a point)
Float, Double        number, shortest round-trip digits in Java's ``Double.toString``
                     layout (``0.1``, ``100.0``, ``1.0E10``, ``1.5E-5``); NaN and
                     infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
Decimal(p,s)         string with exactly ``s`` fractional digits: ``"10.500000000"``
Decimal (no p/s)     string, as stored
Varint               number
Utf8, Uuid, ...      string (Inet, Bit, Enum, Timeuuid too)
String (bytes)       base64 string (no line breaks)
Date                 ``"2022-02-22"``
Datetime             ``"2022-12-12T00:00:00Z"``
Timestamp            ``"2022-12-12T00:00:00.000000Z"`` (always 6 fractional digits, UTC)
Interval             integer microseconds
Time                 integer nanoseconds since midnight
Json, JsonDocument   the JSON value itself, embedded as stored (canonical orjson text)
arrays               the stored JSON text, embedded (element storage values)
===================  ================================================================

Doubles: Spark (JDK 17) ``Double.toString`` is not always the shortest representation, so the
Spark face calls Jackson's Schubfach ``DoubleToDecimal.toString`` (jackson-core ships with Spark)
through the built-in ``reflect`` expression; :func:`java_double` reproduces it in Python.

Strings are escaped the way Jackson (Spark's ``to_json``) does: ``\\"``, ``\\\\``, ``\\b \\t \\n \\f
\\r``, other control characters as ``\\u00XX`` with upper-case hex; nothing else is escaped.
"""

from __future__ import annotations

import base64
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine.types import Kind, SqlType
from changefeed.formats.base import Record, partition_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

    from changefeed.feeds.spec import FeedSpec

NULL = "null"

# ============================================================================ Python: scalars

_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def json_string(s: str) -> str:
    """``s`` as a JSON string literal, escaped exactly as Jackson (Spark's ``to_json``) does."""
    out = orjson.dumps(s).decode()
    if "\\u00" in out:  # orjson writes lower-case hex; only then do it the slow way
        return '"' + s.translate(_ESCAPES) + '"'
    return out


#: Subnormal doubles up to ``20 * MIN_VALUE`` are printed with two digits by Schubfach.
_MIN_VALUE = 5e-324
_TINY_LIMIT = 21 * _MIN_VALUE


def _two_digits(ax: float) -> tuple[str, int]:
    exact = Decimal(ax)
    e = exact.adjusted()
    q = exact.scaleb(-e).quantize(Decimal("0.1"))  # ROUND_HALF_EVEN
    if q >= 10:
        q, e = q / 10, e + 1
    digits = str(q).replace(".", "").rstrip("0") or "0"
    return digits, e


def java_double(x: float) -> str:
    """``x`` as JSON text: the shortest round-trip digits in Java's ``Double.toString`` layout
    (what ``DoubleToDecimal.toString`` prints); NaN/infinities as JSON strings."""
    if x != x:
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    ax = -x if x < 0 else x
    if ax < _TINY_LIMIT:
        digits, exp = _two_digits(ax)
    else:
        r = repr(ax)
        mant, _, e_text = r.partition("e")
        ip, _, fp = mant.partition(".")
        exp = int(e_text) if e_text else 0
        all_digits = ip + fp
        stripped = all_digits.lstrip("0")
        exp += len(ip) - 1 - (len(all_digits) - len(stripped))
        digits = stripped.rstrip("0") or "0"
    if 1e-3 <= ax < 1e7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            frac = digits[exp + 1 :] or "0"
        else:
            whole, frac = "0", "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


# ============================================================================ Python: columns

_BOOL = {True: "true", False: "false", None: NULL}


def _quote_or_null(values: list[Any]) -> list[str]:
    return [NULL if v is None else '"' + v + '"' for v in values]


def python_values(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> list[str]:
    """Render one Arrow column (of ``changes.arrow_type(t)``) as JSON texts, column-wise."""
    import pyarrow as pa
    import pyarrow.compute as pc

    k = t.kind
    if k is Kind.BOOL:
        return [_BOOL[v] for v in arr.to_pylist()]
    if k in (Kind.INT, Kind.UINT, Kind.INTERVAL, Kind.TIME):
        return pc.cast(arr, pa.string()).fill_null(NULL).to_pylist()  # type: ignore[no-any-return]
    if k is Kind.FLOAT:
        # repr() already has Java's layout for 0 and 1e-3 <= |v| < 1e7 (NaN fails every test)
        return [
            NULL
            if v is None
            else repr(v)
            if (1e-3 <= v < 1e7 or -1e7 < v <= -1e-3 or v == 0)
            else java_double(v)
            for v in arr.to_pylist()
        ]
    if k is Kind.DECIMAL:
        if pa.types.is_decimal(arr.type):
            return [NULL if v is None else '"' + format(v, "f") + '"' for v in arr.to_pylist()]
        return _quote_or_null(arr.to_pylist())
    if k is Kind.BYTES:
        b64 = base64.b64encode
        return [NULL if v is None else '"' + b64(v).decode() + '"' for v in arr.to_pylist()]
    if k in (Kind.DATE, Kind.DATETIME, Kind.TIMESTAMP):
        return _python_times(arr, k)
    if k in (Kind.JSON, Kind.ARRAY, Kind.VARINT):
        return [NULL if v is None else v for v in arr.to_pylist()]
    # text, uuid, timeuuid, inet, bit, enum
    return [NULL if v is None else json_string(v) for v in arr.to_pylist()]


_TIME_UNITS = {Kind.DATE: "D", Kind.DATETIME: "s", Kind.TIMESTAMP: "us"}
_TIME_FORMATS = {
    Kind.DATE: '"%Y-%m-%d"',
    Kind.DATETIME: '"%Y-%m-%dT%H:%M:%SZ"',
    Kind.TIMESTAMP: '"%Y-%m-%dT%H:%M:%SZ"',
}


def _python_times(arr: pa.Array | pa.ChunkedArray, k: Kind) -> list[str]:
    """Dates and times, UTC: numpy's ISO formatting when available (3x faster), else Arrow's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    unit = _TIME_UNITS[k]
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with pyspark/pandas
        if k is Kind.DATETIME:
            arr = pc.floor_temporal(arr, unit="second").cast(pa.timestamp("s", tz="UTC"))
        elif k is Kind.TIMESTAMP and arr.type.tz is None:
            arr = arr.cast(pa.timestamp("us", tz="UTC"))
        return pc.strftime(arr, format=_TIME_FORMATS[k]).fill_null(NULL).to_pylist()  # type: ignore[no-any-return]
    ints = arr.cast(pa.int32() if k is Kind.DATE else pa.int64()).fill_null(0).to_numpy()
    if k is Kind.DATETIME:
        ints = ints // 1_000_000
    texts = np.datetime_as_string(ints.astype(f"datetime64[{unit}]"), unit=unit).tolist()  # type: ignore[call-overload]
    end = '"' if k is Kind.DATE else 'Z"'
    if arr.null_count:
        return [
            '"' + s + end if ok else NULL for s, ok in zip(texts, arr.is_valid().to_pylist(), strict=True)
        ]
    return ['"' + s + end for s in texts]


def python_value(value: Any, t: SqlType) -> str:
    """One Arrow-compatible value (as ``to_pylist`` gives it) as JSON text."""
    import pyarrow as pa

    from changefeed.engine.changes import arrow_type

    return python_values(pa.array([value], type=arrow_type(t)), t)[0]


def records(keys: list[str], values: list[str], ts: list[int], feed: FeedSpec) -> list[Record]:
    """Encoder output from per-row key and value JSON texts."""
    n = feed.partitions
    key_bytes = [k.encode() for k in keys]
    return [(partition_of(kb, n), kb, v.encode(), t) for kb, v, t in zip(key_bytes, values, ts, strict=True)]


# ============================================================================ Spark

_DOUBLE_TO_DECIMAL = "com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal"
_NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\]'  # Java regex: [\x00-\x1f"\\]
_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00", "Universal", "Zulu"}


def spark_json_string(c: Column) -> Column:
    """A string column as a JSON string literal (Jackson escaping), NULL stays NULL."""
    from pyspark.sql import functions as F

    j = F.to_json(F.array(c))  # ["..."]: Jackson escaping, but slow; only where needed
    escaped = F.substr(j, F.lit(2), F.length(j) - F.lit(2))
    return F.when(c.rlike(_NEEDS_ESCAPE), escaped).otherwise(_quoted(c))


def _quoted(c: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(F.lit('"'), c, F.lit('"'))


def spark_value(c: Column, t: SqlType, session_tz: str = "UTC") -> Column:
    """JSON text of a column of ``changes.arrow_type(t)`` (as Spark reads it); never NULL."""
    from pyspark.sql import functions as F

    k = t.kind
    out: Column
    if k is Kind.BOOL:
        out = F.when(c, F.lit("true")).when(~c, F.lit("false"))
    elif k in (Kind.INT, Kind.UINT, Kind.INTERVAL, Kind.TIME, Kind.VARINT):
        out = c.cast("string")
    elif k is Kind.FLOAT:
        d = F.coalesce(c.cast("double"), F.lit(0.0))  # reflect cannot pass NULL as a double
        s = F.reflect(F.lit(_DOUBLE_TO_DECIMAL), F.lit("toString"), d)
        special = F.isnan(c) | (F.abs(c) == F.lit(float("inf")))
        out = F.when(c.isNull(), F.lit(None)).when(special, _quoted(s)).otherwise(s)
    elif k is Kind.DECIMAL:
        out = _quoted(c.cast("string"))
    elif k is Kind.BYTES:
        # base64() may chunk lines (spark.sql.chunkBase64String.enabled): drop the breaks.
        out = _quoted(F.replace(F.base64(c), F.lit("\r\n"), F.lit("")))
    elif k is Kind.DATE:
        out = _quoted(F.date_format(c, "yyyy-MM-dd"))
    elif k in (Kind.DATETIME, Kind.TIMESTAMP):
        ts = c if session_tz in _UTC_NAMES else F.to_utc_timestamp(c, session_tz)
        pattern = "yyyy-MM-dd'T'HH:mm:ss'Z'" if k is Kind.DATETIME else "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"
        out = _quoted(F.date_format(ts, pattern))
    elif k in (Kind.JSON, Kind.ARRAY):
        out = c
    else:
        out = spark_json_string(c)
    return F.coalesce(out, F.lit(NULL))


# ============================================================================ objects


def member_prefixes(names: list[str]) -> list[str]:
    """``"name":`` for each column name."""
    return [json_string(n) + ":" for n in names]


def python_object(prefixes: list[str], columns: list[list[str]], n: int) -> list[str]:
    """Per row, ``{"a":..,"b":..}`` from rendered columns."""
    if not columns:
        return ["{}"] * n
    members = [[p + v for v in col] for p, col in zip(prefixes, columns, strict=True)]
    return ["{" + ",".join(row) + "}" for row in zip(*members, strict=True)]


def spark_object(prefixes: list[str], columns: list[Column]) -> Column:
    """``{"a":..,"b":..}`` from rendered (never NULL) columns."""
    from pyspark.sql import functions as F

    parts: list[Column] = []
    for i, (p, col) in enumerate(zip(prefixes, columns, strict=True)):
        parts += [F.lit(("{" if i == 0 else ",") + p), col]
    if not parts:
        return F.lit("{}")
    return F.concat(*parts, F.lit("}"))


def spark_partial_object(prefixes: list[str], columns: list[Column], present: list[Column]) -> Column:
    """``{..}`` holding only the members whose ``present`` condition is true."""
    from pyspark.sql import functions as F

    if not prefixes:
        return F.lit("{}")
    members = [
        F.when(cond, F.concat(F.lit(p), col)) for p, col, cond in zip(prefixes, columns, present, strict=True)
    ]
    return F.concat(F.lit("{"), F.concat_ws(",", *members), F.lit("}"))


__all__ = [
    "NULL",
    "java_double",
    "json_string",
    "member_prefixes",
    "python_object",
    "python_value",
    "python_values",
    "records",
    "spark_json_string",
    "spark_object",
    "spark_partial_object",
    "spark_value",
]
