"""More CDC query functions (dates and times, ``format``, JSON access, arrays, regular
expressions), and the names CockroachDB refuses in CDC queries.

See :mod:`changefeed.formats.cdc_functions` for the overload form; :func:`register` adds these.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine import json_doc
from changefeed.engine.patterns import regex_search
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedFailed, InvalidRegularExpression
from changefeed.feeds.cdc_plan import JSONB
from changefeed.formats import cdc_casts as C, crdb_values as V

if TYPE_CHECKING:
    from pyspark.sql import Column

US = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)

# ============================================================================ refused names

#: Aggregates CockroachDB knows (refused: ``function "count" unsupported by CDC``).
AGGREGATES = frozenset(
    [
        "array_agg",
        "array_cat_agg",
        "avg",
        "bit_and",
        "bit_or",
        "bool_and",
        "bool_or",
        "concat_agg",
        "corr",
        "count",
        "count_rows",
        "covar_pop",
        "covar_samp",
        "every",
        "final_avg",
        "final_stddev",
        "final_variance",
        "json_agg",
        "json_object_agg",
        "jsonb_agg",
        "jsonb_object_agg",
        "max",
        "min",
        "percentile_cont",
        "percentile_disc",
        "mode",
        "regr_avgx",
        "regr_avgy",
        "regr_count",
        "regr_intercept",
        "regr_r2",
        "regr_slope",
        "regr_sxx",
        "regr_sxy",
        "regr_syy",
        "sqrdiff",
        "st_collect",
        "st_extent",
        "st_makeline",
        "st_memcollect",
        "st_memunion",
        "st_union",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "string_agg",
        "sum",
        "sum_int",
        "var_pop",
        "var_samp",
        "variance",
        "xor_agg",
    ]
)
#: Window functions.
WINDOW = frozenset(
    [
        "row_number",
        "rank",
        "dense_rank",
        "percent_rank",
        "cume_dist",
        "ntile",
        "lag",
        "lead",
        "first_value",
        "last_value",
        "nth_value",
    ]
)
#: Set-returning functions (generators).
GENERATORS = frozenset(
    [
        "generate_series",
        "generate_subscripts",
        "unnest",
        "json_each",
        "jsonb_each",
        "json_each_text",
        "jsonb_each_text",
        "json_array_elements",
        "jsonb_array_elements",
        "json_array_elements_text",
        "jsonb_array_elements_text",
        "json_object_keys",
        "jsonb_object_keys",
        "regexp_split_to_table",
        "pg_get_keywords",
        "information_schema._pg_expandarray",
        "crdb_internal.unary_table",
        "json_populate_recordset",
        "jsonb_populate_recordset",
        "json_to_recordset",
        "jsonb_to_recordset",
    ]
)
#: Volatile functions, and stable ones not on CockroachDB's CDC list.
VOLATILE = frozenset(
    [
        "now",
        "current_timestamp",
        "current_date",
        "current_time",
        "localtime",
        "localtimestamp",
        "clock_timestamp",
        "timeofday",
        "random",
        "setseed",
        "gen_random_uuid",
        "uuid_v4",
        "gen_random_ulid",
        "uuid_generate_v4",
        "unique_rowid",
        "unordered_unique_rowid",
        "nextval",
        "currval",
        "lastval",
        "setval",
        "current_user",
        "session_user",
        "current_role",
        "user",
        "current_catalog",
        "current_schema",
        "current_database",
        "current_schemas",
        "version",
        "pg_sleep",
        "cluster_logical_timestamp",
        "crdb_internal.trace_id",
        "crdb_internal.locality_value",
        "crdb_internal.read_file",
        "crdb_internal.get_namespace_id",
        "crdb_internal.node_id",
        "crdb_internal.force_error",
        "has_table_privilege",
        "has_database_privilege",
        "has_schema_privilege",
        "pg_backend_pid",
        "txid_current",
        "inet_server_addr",
        "inet_server_port",
        "inet_client_addr",
        "inet_client_port",
        "experimental_strftime",
        "experimental_strptime",
        "to_timestamp",
        "to_date",
        "age_now",
        "follower_read_timestamp",
        "experimental_follower_read_timestamp",
        "with_min_timestamp",
        "with_max_staleness",
        "crdb_internal.approximate_timestamp",
        "current_setting",
        "set_config",
        "pg_is_in_recovery",
        "pg_current_wal_lsn",
        "obj_description",
        "col_description",
        "shobj_description",
        "pg_get_userbyid",
        "pg_function_is_visible",
        "pg_table_is_visible",
        "pg_type_is_visible",
        "pg_get_expr",
        "pg_get_indexdef",
        "pg_get_viewdef",
        "pg_get_constraintdef",
        "pg_get_serial_sequence",
        "nameconcatoid",
        "to_regclass",
        "to_regtype",
        "to_regproc",
        "to_regnamespace",
        "to_regrole",
        "array_position",
        "array_positions",
        "crdb_internal.cluster_name",
        "crdb_internal.is_admin",
        "crdb_internal.has_role_option",
    ]
)
#: Every name refused with ``function "x" unsupported by CDC``.
DENIED = AGGREGATES | WINDOW | GENERATORS | VOLATILE
#: Functions on CockroachDB's CDC list that this implementation does not provide.
UNSUPPORTED_HERE = frozenset({"age", "timezone", "to_char", "pg_collation_for"})

# ============================================================================ dates and times

_EXTRACT_FIELDS = (
    "year", "quarter", "month", "week", "day", "dow", "dayofweek", "isodow", "doy", "dayofyear", "hour",
    "minute", "second", "millisecond", "microsecond", "epoch", "isoyear", "decade", "century", "millennium",
)  # fmt: skip


def _moment(us: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=us)


def extract_py(field: str, us: int) -> float:
    """``extract(field FROM ts)`` of a timestamp in microseconds, as a FLOAT."""
    m = _moment(us)
    frac = us % US
    if field == "year":
        return float(m.year)
    if field == "quarter":
        return float((m.month - 1) // 3 + 1)
    if field == "month":
        return float(m.month)
    if field == "week":
        return float(m.isocalendar()[1])
    if field == "isoyear":
        return float(m.isocalendar()[0])
    if field == "day":
        return float(m.day)
    if field in ("dow", "dayofweek"):
        return float(m.isoweekday() % 7)
    if field == "isodow":
        return float(m.isoweekday())
    if field in ("doy", "dayofyear"):
        return float(m.timetuple().tm_yday)
    if field == "hour":
        return float(m.hour)
    if field == "minute":
        return float(m.minute)
    if field == "second":
        return m.second + frac / 1e6
    if field == "millisecond":
        return m.second * 1000 + frac / 1e3
    if field == "microsecond":
        return float(m.second * US + frac)
    if field == "epoch":
        return us / 1e6
    if field == "decade":
        return float(m.year // 10)
    if field == "century":
        return float((m.year + 99) // 100)
    if field == "millennium":
        return float((m.year + 999) // 1000)
    raise ChangefeedFailed(f"unsupported timespan: {field}")


def _extract_spark(field: str, ts: Column) -> Column:
    from pyspark.sql import functions as F

    us = F.unix_micros(ts)
    frac = F.pmod(us, F.lit(US))
    sec = F.second(ts)
    out = {
        "year": F.year(ts),
        "quarter": F.quarter(ts),
        "month": F.month(ts),
        "week": F.weekofyear(ts),
        "isoyear": F.year(F.date_add(F.to_date(ts), 3 - (F.dayofweek(ts) + 5) % 7)),
        "day": F.dayofmonth(ts),
        "dow": F.dayofweek(ts) - 1,
        "dayofweek": F.dayofweek(ts) - 1,
        "isodow": (F.dayofweek(ts) + 5) % 7 + 1,
        "doy": F.dayofyear(ts),
        "dayofyear": F.dayofyear(ts),
        "hour": F.hour(ts),
        "minute": F.minute(ts),
        "second": sec + frac / F.lit(1e6),
        "millisecond": sec * 1000 + frac / F.lit(1e3),
        "microsecond": sec * US + frac,
        "epoch": us / F.lit(1e6),
        "decade": F.floor(F.year(ts) / 10),
        "century": F.floor((F.year(ts) + 99) / 100),
        "millennium": F.floor((F.year(ts) + 999) / 1000),
    }.get(field)
    if out is None:
        return F.raise_error(F.lit(f"unsupported timespan: {field}"))
    return out.cast("double")


def _extract_make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
    src = types[1]

    def run(field: str, v: int) -> float:
        us = v * 86_400 * US if src.kind is Kind.DATE else v
        return extract_py(field.lower(), us)

    return run


def _extract_spark_fn(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    field = k[0]
    if not isinstance(field, str):
        return F.raise_error(F.lit("extract() on Spark needs a constant field"))
    ts = F.to_timestamp(c[1]) if t[1].kind is Kind.DATE else c[1]
    return _extract_spark(field.lower(), ts)


_TRUNC = {
    "microsecond": 1,
    "microseconds": 1,
    "millisecond": 1000,
    "milliseconds": 1000,
    "second": US,
    "minute": 60 * US,
    "hour": 3600 * US,
    "day": 86_400 * US,
}


def date_trunc_py(unit: str, us: int) -> int:
    u = unit.lower()
    step = _TRUNC.get(u)
    if step is not None:
        return us - us % step
    m = _moment(us)
    if u == "week":
        day = (us - us % (86_400 * US)) // US
        d = EPOCH + dt.timedelta(seconds=day)
        start = d - dt.timedelta(days=d.weekday())
    elif u == "month":
        start = m.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elif u == "quarter":
        start = m.replace(month=(m.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0)
    elif u == "year":
        start = m.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        raise ChangefeedFailed(f"unsupported timespan: {unit}")
    delta = start - EPOCH
    return (delta.days * 86_400 + delta.seconds) * US


def _trunc_make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
    src = types[1]
    return lambda unit, v: date_trunc_py(unit, v * 86_400 * US if src.kind is Kind.DATE else v)


def _trunc_spark(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    unit = k[0]
    if not isinstance(unit, str):
        return F.raise_error(F.lit("date_trunc() on Spark needs a constant unit"))
    u = (
        unit.lower().rstrip("s")
        if unit.lower() not in ("microseconds", "milliseconds")
        else unit.lower()[:-1]
    )
    if u not in (
        "microsecond",
        "millisecond",
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "quarter",
        "year",
    ):
        return F.raise_error(F.lit(f"unsupported timespan: {unit}"))
    ts = F.to_timestamp(c[1]) if t[1].kind is Kind.DATE else c[1]
    return F.date_trunc(u, ts)


def _overlaps_py(a: int, b: int, c: int, d: int) -> bool:
    s1, e1 = min(a, b), max(a, b)
    s2, e2 = min(c, d), max(c, d)
    return (s1 < e2 and s2 < e1) or s1 == s2


def _overlaps_spark(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    s1, e1 = F.least(c[0], c[1]), F.greatest(c[0], c[1])
    s2, e2 = F.least(c[2], c[3]), F.greatest(c[2], c[3])
    return ((s1 < e2) & (s2 < e1)) | (s1 == s2)


# ============================================================================ format()

_FORMAT = re.compile(r"%(?:(\d+)\$)?([sIL%])")


def format_pieces(fmt: str) -> list[tuple[str, int]]:
    """``format``'s template as pieces: (literal text, -1) or (conversion, argument index)."""
    out: list[tuple[str, int]] = []
    pos = 0
    nxt = 0
    for m in _FORMAT.finditer(fmt):
        if m.start() > pos:
            out.append((fmt[pos : m.start()], -1))
        pos = m.end()
        if m.group(2) == "%":
            out.append(("%", -1))
            continue
        idx = int(m.group(1)) - 1 if m.group(1) else nxt
        nxt = idx + 1
        out.append((m.group(2), idx))
    if "%" in fmt[pos:]:
        raise ChangefeedFailed("unterminated format() type specifier")
    if pos < len(fmt):
        out.append((fmt[pos:], -1))
    return out


def _format_make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
    def run(fmt: str | None, *args: Any) -> str | None:
        if fmt is None:
            return None
        out = []
        for text, idx in format_pieces(fmt):
            if idx < 0:
                out.append(text)
                continue
            if idx >= len(args):
                raise ChangefeedFailed("not enough arguments")
            v, t = args[idx], types[idx + 1]
            if text == "s":
                out.append("" if v is None else C.text_of(v, t))
            elif text == "L":
                out.append("NULL" if v is None else C.quote_literal(C.text_of(v, t)))
            else:
                if v is None:
                    raise ChangefeedFailed("NULL cannot be formatted as an SQL identifier")
                out.append(C.quote_ident(C.text_of(v, t)))
        return "".join(out)

    return run


def _format_spark(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    fmt = k[0]
    if not isinstance(fmt, str):
        return F.raise_error(F.lit("format() on Spark needs a constant format string"))
    parts: list[Column] = []
    for text, idx in format_pieces(fmt):
        if idx < 0:
            parts.append(F.lit(text))
            continue
        if idx + 1 >= len(c):
            return F.raise_error(F.lit("not enough arguments"))
        x, ty = c[idx + 1], t[idx + 1]
        if text == "s":
            parts.append(F.coalesce(C.spark_text(x, ty), F.lit("")))
        elif text == "L":
            parts.append(F.coalesce(C.spark_quote_literal(C.spark_text(x, ty)), F.lit("NULL")))
        else:
            parts.append(C.spark_quote_ident(C.spark_text(x, ty)))
    return F.concat(*parts) if parts else F.lit("")


# ============================================================================ JSON access


def _json_get(doc: str, key: Any) -> Any:
    parsed = json_doc.loads(doc)
    if isinstance(key, int):
        if not isinstance(parsed, list):
            return None
        try:
            return parsed[key]
        except IndexError:
            return None
    if not isinstance(parsed, dict):
        return None
    return parsed.get(key)


_MISSING = object()


def _arrow_make(text: bool) -> Callable[[Sequence[SqlType], SqlType], Callable[..., Any]]:
    def make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
        def run(doc: str, key: Any) -> str | None:
            if isinstance(key, str) and isinstance(json_doc.loads(doc), list):
                return None
            v = _json_get(doc, key)
            if v is None and not _has(doc, key):
                return None
            if text:
                if v is None:
                    return None
                return v if isinstance(v, str) else V.json_document(v)
            return json_doc.dumps(v)

        return run

    return make


def _has(doc: str, key: Any) -> bool:
    parsed = json_doc.loads(doc)
    if isinstance(key, int):
        return isinstance(parsed, list) and -len(parsed) <= key < len(parsed)
    return isinstance(parsed, dict) and key in parsed


def _json_path(key: Any) -> str | None:
    if isinstance(key, int):
        return f"$[{key}]" if key >= 0 else None
    if isinstance(key, str):
        return '$["' + key.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return None


def _arrow_spark(
    text: bool,
) -> Callable[[Sequence[Column], Sequence[SqlType], SqlType, Sequence[Any]], Column]:
    def build(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
        from pyspark.sql import functions as F

        path = _json_path(k[1])
        if path is None:
            return F.raise_error(F.lit("-> and ->> on Spark need a constant key or a non-negative index"))
        v = F.variant_get(F.parse_json(c[0]), path, "variant")
        if not text:
            return F.to_json(v)
        as_text = F.variant_get(F.parse_json(c[0]), path, "string")
        is_str = F.schema_of_variant(v) == "STRING"
        return (
            F.when(v.isNull() | (F.schema_of_variant(v) == "VOID"), F.lit(None))
            .when(is_str, as_text)
            .otherwise(V.spark_value(F.to_json(v), JSONB))
        )

    return build


def _typeof_py(doc: str) -> str:
    v = json_doc.loads(doc)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float | Decimal):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _typeof_spark(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    s = F.schema_of_variant(F.parse_json(c[0]))
    return (
        F.when(c[0].isNull(), F.lit(None).cast("string"))
        .when(s == "VOID", F.lit("null"))
        .when(s == "BOOLEAN", F.lit("boolean"))
        .when(s == "STRING", F.lit("string"))
        .when(F.startswith(s, F.lit("ARRAY")), F.lit("array"))
        .when(F.startswith(s, F.lit("OBJECT")), F.lit("object"))
        .otherwise(F.lit("number"))
    )


# ============================================================================ arrays


def _element_text(v: Any, el: SqlType) -> str:
    if el.kind is Kind.DECIMAL:
        return str(v)
    return C.text_of(v, el)


def _array_to_string_make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
    el = types[0].element
    assert el is not None

    def run(arr: str, sep: str, null_text: str | None = None) -> str:
        items = orjson.loads(arr)
        out = [null_text if x is None else _element_text(x, el) for x in items]
        return sep.join(x for x in out if x is not None)

    return run


def _array_to_string_spark(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
    from pyspark.sql import functions as F

    el = t[0].element
    assert el is not None
    kind = {Kind.INT: "bigint", Kind.BOOL: "boolean", Kind.FLOAT: "double"}.get(el.kind, "string")
    parsed = F.from_json(c[0], f"array<{kind}>")
    texts = F.transform(
        parsed, lambda x: C.spark_text(x, el) if el.kind is not Kind.DECIMAL else x.cast("string")
    )
    if len(c) == 3:
        texts = F.transform(texts, lambda x: F.coalesce(x, c[2]))
    if not isinstance(k[1], str):
        return F.raise_error(F.lit("array_to_string() on Spark needs a constant delimiter"))
    return F.array_join(texts, k[1])


# ============================================================================ regular expressions


def _regex_py(ci: bool, negate: bool) -> Callable[[Sequence[SqlType], SqlType], Callable[..., Any]]:
    def make(types: Sequence[SqlType], ret: SqlType) -> Callable[..., Any]:
        def run(s: str, pattern: str) -> bool:
            try:
                return regex_search(pattern, s, ci) != negate
            except InvalidRegularExpression as e:
                raise ChangefeedFailed(str(e)) from None

        return run

    return make


def _regex_spark(
    ci: bool, negate: bool
) -> Callable[[Sequence[Column], Sequence[SqlType], SqlType, Sequence[Any]], Column]:
    def build(c: Sequence[Column], t: Sequence[SqlType], r: SqlType, k: Sequence[Any]) -> Column:
        from pyspark.sql import functions as F

        pattern = F.concat(F.lit("(?i)"), c[1]) if ci else c[1]
        hit = F.regexp_like(c[0], pattern)
        return ~hit if negate else hit

    return build


def _p(f: Callable[..., Any]) -> Callable[[Sequence[SqlType], SqlType], Callable[..., Any]]:
    return lambda types, ret: f


def register(fn: Callable[..., None]) -> None:
    """Add this module's overloads through ``cdc_functions.fn``."""
    for name in ("extract", "date_part"):
        for cls in ("timestamptz", "timestamp", "date"):
            fn(name, f"{name}:{cls}", ("string", cls), "float", _extract_make, _extract_spark_fn)
    for cls in ("timestamptz", "timestamp"):
        fn("date_trunc", f"date_trunc:{cls}", ("string", cls), cls, _trunc_make, _trunc_spark)
    fn("date_trunc", "date_trunc:date", ("string", "date"), "timestamptz", _trunc_make, _trunc_spark)
    for cls in ("timestamptz", "timestamp"):
        fn("overlaps", f"overlaps:{cls}", (cls, cls, cls, cls), "bool", _p(_overlaps_py), _overlaps_spark)
    fn("format", "format", ("string", "any", "..."), "string", _format_make, _format_spark, strict=False)
    fn("format", "format:1", ("string",), "string", _format_make, _format_spark, strict=False)
    fn("->", "->:string", ("jsonb", "string"), "jsonb", _arrow_make(False), _arrow_spark(False))
    fn("->", "->:int", ("jsonb", "int"), "jsonb", _arrow_make(False), _arrow_spark(False))
    fn("->>", "->>:string", ("jsonb", "string"), "string", _arrow_make(True), _arrow_spark(True))
    fn("->>", "->>:int", ("jsonb", "int"), "string", _arrow_make(True), _arrow_spark(True))
    for name in ("jsonb_typeof", "json_typeof"):
        fn(name, name, ("jsonb",), "string", _p(_typeof_py), _typeof_spark)
    fn("array_to_string", "array_to_string:2", ("array", "string"), "string", _array_to_string_make,
       _array_to_string_spark)  # fmt: skip
    fn("array_to_string", "array_to_string:3", ("array", "string", "string"), "string", _array_to_string_make,
       _array_to_string_spark)  # fmt: skip
    for op, ci, neg in (("~", False, False), ("~*", True, False), ("!~", False, True), ("!~*", True, True)):
        fn(op, f"{op}:string", ("string", "string"), "bool", _regex_py(ci, neg), _regex_spark(ci, neg))


__all__ = [
    "AGGREGATES",
    "DENIED",
    "GENERATORS",
    "UNSUPPORTED_HERE",
    "VOLATILE",
    "WINDOW",
    "date_trunc_py",
    "extract_py",
    "format_pieces",
    "register",
]
