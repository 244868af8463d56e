"""How a column value renders in CockroachDB's changefeed JSON, in Python and in Spark, byte for
byte the same (CockroachDB's ``tree.AsJSON`` printed by its ``json.JSON.Format``).

===================  ================================================================
type                 JSON text
===================  ================================================================
BOOL                 ``true`` / ``false``
INT*                 number, exact
FLOAT                apd's to-scientific-string of the shortest round-trip digits:
                     ``0.5``, ``3``, ``1E+2``, ``1.2E+3``, ``1E-7``; NaN/±Inf as
                     ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
DECIMAL              number keeping its scale (``1.50``, ``400``, ``1E-7``); NaN/Inf quoted
STRING, ENUM, UUID,  string; Go-style escaping: ``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``,
INET, BIT            other control characters ``\\u00xx`` (lower-case hex), the rest raw
BYTES                ``"\\\\x0102ff"`` (hex bytea output, backslash escaped in JSON)
DATE                 ``"2019-01-02"``
TIMESTAMPTZ          ``"2019-01-02T03:04:05.123456Z"`` (RFC 3339 in UTC, zeros trimmed)
TIMESTAMP            ``"2019-01-02T03:04:05.5"`` (no zone)
TIME                 ``"03:04:05.123456"`` (zeros trimmed)
INTERVAL             PostgreSQL style: ``"1 day 04:05:06"``, ``"00:00:00.001"``
JSONB                the document re-printed: keys sorted bytewise, ``", "`` and ``": "``
ARRAY                ``[1, null, 3]``: elements rendered as above
===================  ================================================================

Both faces give the JSON text of each value (``null`` for SQL NULL); the encoder assembles
messages from these texts. The Spark face uses only built-in column expressions (JVM-side):
the shortest digits of a double come from Jackson's Schubfach ``DoubleToDecimal`` (shipped with
Spark) through ``reflect``, and JSONB is re-printed through Spark's VARIANT (whose objects keep
their keys sorted).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.types import Kind, SqlType
from changefeed.feeds.cdc_plan import is_canonical_json

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

NULL = "null"
US_PER_DAY = 86_400_000_000

# ============================================================================ Python: scalars

_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES.update({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", ord('"'): '\\"', ord("\\"): "\\\\"})
_SIMPLE_CONTROLS = frozenset("\n\r\t")


def json_string(s: str) -> str:
    """``s`` as a JSON string literal, escaped as CockroachDB's ``encodeJSONString`` does."""
    out = orjson.dumps(s).decode()
    if "\\" in out and any(ch < " " and ch not in _SIMPLE_CONTROLS for ch in s):
        return '"' + s.translate(_ESCAPES) + '"'  # orjson writes \b and \f; Go writes \u0008
    return out


def sci_string(sign: str, digits: str, exponent: int) -> str:
    """The General Decimal Arithmetic to-scientific-string of ``sign digits x 10**exponent``
    (what apd's ``Decimal.String()`` and Python's ``str(Decimal)`` print)."""
    n = len(digits)
    adjusted = exponent + n - 1
    if exponent <= 0 and adjusted >= -6:
        if exponent == 0:
            return sign + digits
        point = n + exponent
        if point > 0:
            return sign + digits[:point] + "." + digits[point:]
        return sign + "0." + "0" * (-point) + digits
    mant = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{mant}E{'+' if adjusted >= 0 else '-'}{abs(adjusted)}"


def float_text(x: float) -> str:
    """A FLOAT as CockroachDB prints it: apd ``SetFloat64`` (shortest digits) then ``String()``."""
    if x != x:
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0"
    mant, _, e_text = repr(abs(x)).partition("e")
    ip, _, fp = mant.partition(".")
    exp = int(e_text) if e_text else 0
    all_digits = ip + fp
    exp -= len(fp)
    digits = all_digits.lstrip("0")
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    return sci_string(sign, stripped, exp)


def decimal_text(d: Decimal) -> str:
    if d.is_nan():
        return '"NaN"'
    if d.is_infinite():
        return '"Infinity"' if d > 0 else '"-Infinity"'
    return str(d)


def _frac(us: int) -> str:
    return "" if us == 0 else "." + f"{us:06d}".rstrip("0")


def timestamp_text(us: int, zoned: bool) -> str:
    secs, frac = divmod(us, 1_000_000)
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=secs)
    return '"' + t.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + _frac(frac) + ("Z" if zoned else "") + '"'


def time_text(ns: int) -> str:
    us = ns // 1000
    secs, frac = divmod(us, 1_000_000)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return f'"{h:02d}:{m:02d}:{s:02d}{_frac(frac)}"'


def interval_text(us: int) -> str:
    """PostgreSQL IntervalStyle (CockroachDB's default output) of a day-time interval."""
    days = -((-us) // US_PER_DAY) if us < 0 else us // US_PER_DAY
    rest = us - days * US_PER_DAY
    parts = []
    if days:
        parts.append(f"{days} day" if days == 1 else f"{days} days")
    if rest or not days:
        sign = "-" if rest < 0 else ""
        rest = abs(rest)
        secs, frac = divmod(rest, 1_000_000)
        h, r = divmod(secs, 3600)
        m, s = divmod(r, 60)
        parts.append(f"{sign}{h:02d}:{m:02d}:{s:02d}{_frac(frac)}")
    return '"' + " ".join(parts) + '"'


def json_document(v: Any) -> str:
    """A JSON document (parsed) re-printed the CockroachDB way: sorted keys, spaced separators."""
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: kv[0].encode())
        return "{" + ", ".join(json_string(k) + ": " + json_document(x) for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(json_document(x) for x in v) + "]"
    if isinstance(v, str):
        return json_string(v)
    if v is None:
        return NULL
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return float_text(v)
    if isinstance(v, Decimal):
        return json_doc.number_text(v)
    return str(v)


def storage_text(v: Any, t: SqlType) -> str:
    """One value in its storage form (as ``SqlType.to_db`` writes it) as JSON text."""
    if v is None:
        return NULL
    k = t.kind
    if k is Kind.BOOL:
        return "true" if v else "false"
    if k in (Kind.INT, Kind.UINT, Kind.VARINT):
        return str(t.from_db(v)) if k is Kind.UINT else str(v)
    if k is Kind.FLOAT:
        return float_text(float(v))
    if k is Kind.DECIMAL:
        return decimal_text(Decimal(v))
    if k is Kind.BYTES:
        raw = bytes.fromhex(v["$b"]) if isinstance(v, dict) else bytes(v)
        return '"\\\\x' + raw.hex() + '"'
    if k is Kind.DATE:
        return '"' + (dt.date(1970, 1, 1) + dt.timedelta(days=int(v))).isoformat() + '"'
    if k is Kind.DATETIME:
        return timestamp_text(int(v) * 1_000_000, True)
    if k is Kind.TIMESTAMP:
        return timestamp_text(int(v), t.zoned)
    if k is Kind.TIME:
        return time_text(int(v))
    if k is Kind.INTERVAL:
        return interval_text(int(v))
    if k is Kind.JSON:
        if is_canonical_json(t):
            return str(v)  # a CDC query's JSON, printed the CockroachDB way already
        return json_document(json_doc.loads(v) if isinstance(v, str) else v)
    if k is Kind.ARRAY:
        assert t.element is not None
        el = t.element
        items = orjson.loads(v) if isinstance(v, str) else v
        return "[" + ", ".join(storage_text(x, el) for x in items) + "]"
    return json_string(str(v))


# ============================================================================ Python: columns


def python_values(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> list[str]:
    """Render one Arrow column (of ``changes.arrow_type(t)``) as JSON texts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    k = t.kind
    if k in (Kind.INT, Kind.UINT):
        return pc.cast(arr, pa.string()).fill_null(NULL).to_pylist()  # type: ignore[no-any-return]
    values = arr.to_pylist()
    if k is Kind.BOOL:
        return [NULL if v is None else "true" if v else "false" for v in values]
    if k is Kind.VARINT:
        return [NULL if v is None else v for v in values]
    if k is Kind.FLOAT:
        return [NULL if v is None else float_text(v) for v in values]
    if k is Kind.DECIMAL:
        return [NULL if v is None else decimal_text(Decimal(v)) for v in values]
    if k is Kind.BYTES:
        return [NULL if v is None else '"\\\\x' + v.hex() + '"' for v in values]
    if k is Kind.DATE:
        return [NULL if v is None else '"' + v.isoformat() + '"' for v in values]
    if k in (Kind.TIMESTAMP, Kind.DATETIME):
        ints = pc.cast(arr, pa.int64()).to_pylist()
        zoned = t.zoned or k is Kind.DATETIME
        return [NULL if v is None else timestamp_text(v, zoned) for v in ints]
    if k is Kind.TIME:
        return [NULL if v is None else time_text(v) for v in values]
    if k is Kind.INTERVAL:
        return [NULL if v is None else interval_text(v) for v in values]
    if k in (Kind.JSON, Kind.ARRAY):
        return [storage_text(v, t) for v in values]
    return [NULL if v is None else json_string(v) for v in values]


_CONTROL = "[\\x00-\\x1f]"


def arrow_values(arr: pa.Array | pa.ChunkedArray, t: SqlType) -> pa.Array:
    """:func:`python_values` as an Arrow string array (never null), computed column-wise with
    Arrow kernels for the common types."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    k = t.kind
    if k in (Kind.INT, Kind.UINT):
        return pc.cast(arr, pa.string()).fill_null(NULL)
    if k is Kind.BOOL:
        return pc.if_else(arr, "true", "false").fill_null(NULL)
    if k is Kind.DECIMAL and pa.types.is_decimal(arr.type) and (t.scale or 0) <= 6:
        # plain notation equals the scientific string while the adjusted exponent stays >= -6
        return pc.cast(arr, pa.string()).fill_null(NULL)
    if (
        k in (Kind.TEXT, Kind.UUID, Kind.INET, Kind.BIT, Kind.ENUM)
        and not pc.any(pc.match_substring_regex(arr, _CONTROL)).as_py()
    ):
        escaped = pc.replace_substring(pc.replace_substring(arr, "\\", "\\\\"), '"', '\\"')
        return pc.binary_join_element_wise('"', escaped, '"', "").fill_null(NULL)
    if k is Kind.DATE:
        return pc.binary_join_element_wise('"', pc.strftime(arr, format="%Y-%m-%d"), '"', "").fill_null(NULL)
    if k is Kind.FLOAT and pa.types.is_float64(arr.type):
        return arrow_float_texts(arr).fill_null(NULL)
    return pa.array(python_values(arr, t), type=pa.string())


#: Arrow's shortest text of a double that is not already apd's (:func:`arrow_float_texts`): an
#: integer ending in zeros (``250000``: apd writes ``2.5E+5``), a positive exponent (Arrow writes
#: ``1.2345E+4`` from 1e10 on where apd may write plain digits), NaN and the infinities.
_FLOAT_NOT_APD = "^-?[1-9][0-9]*0$|E\\+|n"


def arrow_float_texts(arr: pa.Array) -> pa.Array:
    """:func:`float_text` of a float64 column, column-wise (nulls stay null).

    Arrow's cast to string prints the shortest round-trip digits, as ``repr`` does: in plain
    notation for moderate magnitudes, as ``d.ddde-x`` below 1e-6 and ``d.ddde+x`` for large ones.
    apd's ``String()`` of the same digits differs from that only by the upper-case ``E``, except
    for the values :data:`_FLOAT_NOT_APD` finds; those (rare in most data) are rendered one by
    one. ``tests/test_crdb_json.py`` compares the two on random doubles of every magnitude."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pc.replace_substring(pc.cast(arr, pa.string()), "e", "E")
    odd = pc.fill_null(pc.match_substring_regex(texts, _FLOAT_NOT_APD), False)
    if pc.any(odd).as_py():
        values = pc.filter(arr, odd).to_pylist()
        texts = pc.replace_with_mask(texts, odd, pa.array([float_text(v) for v in values], pa.string()))
    return texts


# ============================================================================ Spark

_DOUBLE_TO_DECIMAL = "com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal"
_NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\]'  # Java regex: [\x00-\x1f"\\]
_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00", "Universal", "Zulu"}
# A separator outside JSON strings: followed by whole strings and non-quote characters only.
_OUTSIDE_STRINGS = '(?=(?:[^"]|"(?:[^"\\\\]|\\\\.)*")*$)'


def _quoted(c: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(F.lit('"'), c, F.lit('"'))


def spark_json_string(c: Column) -> Column:
    """A string column as a JSON string literal, Go-style escaping; NULL stays NULL.

    The escaping is one fold over the 32 control characters (a small expression: a job plans
    it for every micro-batch), evaluated only for the strings that need it."""
    from pyspark.sql import functions as F

    def control(acc: Column, i: Column) -> Column:
        short = F.when(i == 9, F.lit("\\t")).when(i == 10, F.lit("\\n")).when(i == 13, F.lit("\\r"))
        esc = short.otherwise(F.concat(F.lit("\\u00"), F.lpad(F.lower(F.hex(i)), 2, "0")))
        return F.replace(acc, F.char(i), esc)

    quoted = F.replace(F.replace(c, F.lit("\\"), F.lit("\\\\")), F.lit('"'), F.lit('\\"'))
    e = F.aggregate(F.sequence(F.lit(0), F.lit(31)), quoted, control)
    return F.when(c.rlike(_NEEDS_ESCAPE), _quoted(e)).otherwise(_quoted(c))


def spark_sci_string(sign: Column, digits: Column, exponent: Column) -> Column:
    """:func:`sci_string` as a column expression (``digits`` without leading zeros, or "0")."""
    from pyspark.sql import functions as F

    n = F.length(digits)
    adjusted = exponent + n - F.lit(1)
    point = n + exponent
    plain = (
        F.when(exponent == 0, digits)
        .when(
            point > 0,
            F.concat(F.substring(digits, F.lit(1), point), F.lit("."), F.substr(digits, point + F.lit(1))),
        )
        .otherwise(F.concat(F.lit("0."), F.repeat(F.lit("0"), -point), digits))
    )
    mant = F.when(
        n > 1, F.concat(F.substr(digits, F.lit(1), F.lit(1)), F.lit("."), F.substr(digits, F.lit(2)))
    )
    mant = mant.otherwise(digits)
    sci = F.concat(
        mant,
        F.lit("E"),
        F.when(adjusted >= 0, F.lit("+")).otherwise(F.lit("-")),
        F.abs(adjusted).cast("string"),
    )
    body = F.when((exponent <= 0) & (adjusted >= -6), plain).otherwise(sci)
    return F.concat(sign, body)


def _shortest_text(d: Column) -> Column:
    """The shortest round-tripping decimal of a non-NULL double: -1.0E10, 100.0, 0.001."""
    from pyspark.sql import functions as F

    return F.reflect(F.lit(_DOUBLE_TO_DECIMAL), F.lit("toString"), d)


def float_text_column(name: str) -> str:
    """The column :func:`with_float_texts` adds for the FLOAT column ``name``."""
    return f"__shortest_{name}"


def with_float_texts(df: DataFrame, names: list[str]) -> DataFrame:
    """``df`` with each FLOAT column's shortest decimal text (Schubfach, as ``Double.toString``
    prints it from JDK 19 on: ``-1.0E10``, ``100.0``, ``0.001``) computed once, in a projection
    of its own, as the column :func:`float_text_column`; pass it as ``float_text`` to
    :func:`spark_value`.

    The ``reflect`` call that computes it is neither code-generated nor deterministic in Spark's
    eyes; inline, Spark would evaluate it again for every use in the rendering's branches."""
    from pyspark.sql import functions as F

    for n in names:
        df = df.withColumn(
            float_text_column(n), _shortest_text(F.coalesce(F.col(n).cast("double"), F.lit(0.0)))
        )
    return df


def _spark_float(c: Column, text: Column | None = None) -> Column:
    """A FLOAT as CockroachDB prints it (:func:`float_text`), from its shortest text ``text``.

    The apd text follows from the shortest text by string surgery alone (no regular expressions,
    no digit arithmetic on the common paths). The shortest text has no trailing zeros but the
    ``.0`` of an integer, so:

    * no exponent (``1e-3 <= |x| < 1e7``) and not an integer: the text itself (the common case);
    * an integer ``iii.0``: ``iii``, unless it ends in zeros (apd then writes ``1E+2`` for 100);
    * ``m.fffE±x`` (``m`` one non-zero digit): ``m[.fff]E±x`` without the zeros and with the
      sign of a positive exponent, except that apd writes plain notation for ``-6 <= x <= -4``
      (``0.00015``) and for ``x >= 7`` when the digits reach the units (``12345678.5``)."""
    from pyspark.sql import functions as F

    full = text if text is not None else _shortest_text(F.coalesce(c.cast("double"), F.lit(0.0)))
    has_e = F.contains(full, F.lit("E"))
    neg = F.startswith(full, F.lit("-"))
    sign = F.when(neg, F.lit("-")).otherwise(F.lit(""))
    a = F.when(neg, F.substr(full, F.lit(2))).otherwise(full)
    # an integer
    ip = F.substring_index(a, ".", 1)
    int_zeros = F.rtrim(ip, F.lit("0"))
    int_sci = F.concat(
        sign,
        F.substr(int_zeros, F.lit(1), F.lit(1)),
        F.when(F.length(int_zeros) > 1, F.concat(F.lit("."), F.substr(int_zeros, F.lit(2)))).otherwise(
            F.lit("")
        ),
        F.lit("E+"),
        (F.length(ip) - F.lit(1)).cast("string"),
    )
    integral = F.when(F.endswith(ip, F.lit("0")), int_sci).otherwise(F.substring_index(full, ".", 1))
    # m.fffE±x
    mant = F.substring_index(a, "E", 1)
    x_text = F.substring_index(a, "E", -1)
    x = x_text.cast("int")
    digits = F.rtrim(F.concat(F.substr(mant, F.lit(1), F.lit(1)), F.substr(mant, F.lit(3))), F.lit("0"))
    n = F.length(digits)
    sci = F.concat(
        F.rtrim(F.rtrim(F.substring_index(full, "E", 1), F.lit("0")), F.lit(".")),
        F.lit("E"),
        F.when(x >= 0, F.lit("+")).otherwise(F.lit("")),
        x_text,
    )
    small = F.concat(sign, F.lit("0."), F.repeat(F.lit("0"), -x - F.lit(1)), digits)
    large = F.concat(
        sign,
        F.substr(digits, F.lit(1), x + F.lit(1)),
        F.when(n > x + F.lit(1), F.concat(F.lit("."), F.substr(digits, x + F.lit(2)))).otherwise(F.lit("")),
    )
    exponent = F.when(x < 0, F.when(x >= -6, small).otherwise(sci)).otherwise(
        F.when(n > x, large).otherwise(sci)
    )
    tiny = F.concat(sign, _tiny_text(F.abs(c).cast("double")))
    return (
        F.when(c.isNull(), F.lit(None))
        .when(F.isnan(c), F.lit('"NaN"'))
        .when(c == F.lit(float("inf")), F.lit('"Infinity"'))
        .when(c == F.lit(float("-inf")), F.lit('"-Infinity"'))
        .when(~has_e & ~F.endswith(full, F.lit(".0")), full)
        .when(c == 0, F.concat(sign, F.lit("0")))
        .when(~has_e, integral)
        .when(F.abs(c) < F.lit(_TINY_BELOW), F.coalesce(tiny, exponent))
        .otherwise(exponent)
    )


#: Java's shortest text has at least two digits (``4.9E-324``); Go's, one (``5e-324``). They part
#: only for the few subnormals a single digit identifies: k x 2**-1074 below ~1e-321.
_TINY_BELOW = 1e-321


def _tiny_text(c: Column) -> Column:
    """CockroachDB's text of ``|c|`` for the subnormals below :data:`_TINY_BELOW`: Go's for those
    one digit identifies, else the (then equal) shortest text."""
    from pyspark.sql import functions as F

    tiny = 5e-324
    pairs: list[Column] = []
    for k in range(1, int(_TINY_BELOW / tiny) + 1):
        x = k * tiny
        text = float_text(x)
        if len(text.partition("E")[0].replace(".", "")) == 1:
            pairs += [F.lit(x), F.lit(text)]
    return F.element_at(F.create_map(*pairs), c)


def _spark_decimal(c: Column, t: SqlType) -> Column:
    from pyspark.sql import functions as F

    if t.precision is None:  # stored as apd text already
        special = c.isin("NaN", "Infinity", "-Infinity")
        return F.when(special, _quoted(c)).otherwise(c)
    s = c.cast("string")  # plain notation with the column's scale: -0.00000010
    scale = t.scale or 0
    sign = F.when(F.startswith(s, F.lit("-")), F.lit("-")).otherwise(F.lit(""))
    digits = F.ltrim(F.replace(F.replace(s, F.lit("-"), F.lit("")), F.lit("."), F.lit("")), F.lit("0"))
    digits = F.when(digits == "", F.lit("0")).otherwise(digits)
    return spark_sci_string(sign, digits, F.lit(-scale))


def _spark_frac(us: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(us == 0, F.lit("")).otherwise(
        F.concat(F.lit("."), F.rtrim(F.lpad(us.cast("string"), 6, "0"), F.lit("0")))
    )


def _spark_clock(us: Column) -> Column:
    """``HH:MM:SS[.ffffff]`` of a non-negative microsecond count (hours may pass 24)."""
    from pyspark.sql import functions as F

    secs = F.floor(us / F.lit(1_000_000)).cast("long")
    frac = us - secs * F.lit(1_000_000)
    h = F.floor(secs / F.lit(3600)).cast("long")
    m = F.floor((secs % F.lit(3600)) / F.lit(60)).cast("long")
    s = secs % F.lit(60)
    return F.concat(
        F.lpad(h.cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(m.cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(s.cast("string"), 2, "0"),
        _spark_frac(frac),
    )


def _spark_interval(c: Column) -> Column:
    from pyspark.sql import functions as F

    day = F.lit(US_PER_DAY)
    days = F.when(c < 0, -F.floor(-c / day)).otherwise(F.floor(c / day)).cast("long")
    rest = c - days * day
    day_text = F.when(days == 1, F.concat(days.cast("string"), F.lit(" day"))).otherwise(
        F.concat(days.cast("string"), F.lit(" days"))
    )
    clock = F.concat(F.when(rest < 0, F.lit("-")).otherwise(F.lit("")), _spark_clock(F.abs(rest)))
    text = F.when(days == 0, clock).when(rest == 0, day_text).otherwise(F.concat(day_text, F.lit(" "), clock))
    return _quoted(text)


def _spark_timestamp(c: Column, zoned: bool, session_tz: str) -> Column:
    from pyspark.sql import functions as F

    ts = c if session_tz in _UTC_NAMES else F.to_utc_timestamp(c, session_tz)
    us = F.unix_micros(c)
    frac = F.pmod(us, F.lit(1_000_000))
    text = F.concat(F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss"), _spark_frac(frac))
    return _quoted(F.concat(text, F.lit("Z")) if zoned else text)


def _spark_json(c: Column) -> Column:
    """JSONB re-printed: VARIANT keeps object keys sorted; then spaces after separators that are
    outside strings."""
    from pyspark.sql import functions as F

    compact = F.to_json(F.parse_json(c))
    spaced = F.regexp_replace(compact, "([,:])" + _OUTSIDE_STRINGS, "$1 ")
    return spaced


def _spark_element(x: Column, t: SqlType, session_tz: str) -> Column:
    """An array element parsed from its storage JSON (see ``_element_schema``) as JSON text."""
    from pyspark.sql import functions as F

    k = t.kind
    if k is Kind.DATE:
        return spark_value(F.date_add(F.lit("1970-01-01").cast("date"), x.cast("int")), t, session_tz)
    if k in (Kind.TIMESTAMP,):
        return spark_value(F.timestamp_micros(x), t, "UTC")
    if k is Kind.DATETIME:
        return spark_value(F.timestamp_seconds(x), t, "UTC")
    if k is Kind.BYTES:
        return F.when(x.isNull(), F.lit(NULL)).otherwise(
            F.concat(F.lit('"\\\\x'), F.lower(x["$b"]), F.lit('"'))
        )
    if k is Kind.DECIMAL:
        return spark_value(x, SqlType(kind=Kind.DECIMAL, name="DECIMAL"), session_tz)
    return spark_value(x, t, session_tz)


def _element_schema(t: SqlType) -> str:
    k = t.kind
    if k is Kind.BOOL:
        return "boolean"
    if k in (Kind.INT, Kind.DATE, Kind.TIME, Kind.INTERVAL, Kind.TIMESTAMP, Kind.DATETIME):
        return "bigint"
    if k is Kind.FLOAT:
        return "double"
    if k is Kind.BYTES:
        return "struct<`$b`:string>"
    return "string"


def spark_value(c: Column, t: SqlType, session_tz: str = "UTC", float_text: Column | None = None) -> Column:
    """JSON text of a column of ``changes.arrow_type(t)`` (as Spark reads it); never NULL.
    ``float_text``: for a FLOAT column, its :func:`with_float_texts` column (faster)."""
    from pyspark.sql import functions as F

    k = t.kind
    out: Column
    if k is Kind.BOOL:
        out = F.when(c, F.lit("true")).when(~c, F.lit("false"))
    elif k in (Kind.INT, Kind.UINT, Kind.VARINT):
        out = c.cast("string")
    elif k is Kind.FLOAT:
        out = _spark_float(c, float_text)
    elif k is Kind.DECIMAL:
        out = _spark_decimal(c, t)
    elif k is Kind.BYTES:
        out = F.concat(F.lit('"\\\\x'), F.lower(F.hex(c)), F.lit('"'))
    elif k is Kind.DATE:
        out = _quoted(F.date_format(c, "yyyy-MM-dd"))
    elif k in (Kind.TIMESTAMP, Kind.DATETIME):
        out = _spark_timestamp(c, t.zoned or k is Kind.DATETIME, session_tz)
    elif k is Kind.TIME:
        out = _quoted(_spark_clock(F.floor(c / F.lit(1000)).cast("long")))
    elif k is Kind.INTERVAL:
        out = _spark_interval(c)
    elif k is Kind.JSON:
        out = c if is_canonical_json(t) else _spark_json(c)
    elif k is Kind.ARRAY:
        assert t.element is not None
        el = t.element
        parsed = F.from_json(c, f"array<{_element_schema(el)}>")
        items = F.transform(parsed, lambda x: _spark_element(x, el, session_tz))
        out = F.concat(F.lit("["), F.array_join(items, ", "), F.lit("]"))
    else:
        out = spark_json_string(c)
    return F.coalesce(out, F.lit(NULL))


__all__ = [
    "NULL",
    "arrow_values",
    "decimal_text",
    "float_text",
    "json_document",
    "json_string",
    "python_values",
    "sci_string",
    "spark_json_string",
    "spark_sci_string",
    "spark_value",
    "storage_text",
]
