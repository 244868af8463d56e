"""Scalar functions and typed-literal constructors of the three dialects.

YQL typed literals (``Date("2022-02-22")``, ``Timestamp(...)``, ``Interval("PT24H")``, ``Uint64(1)``),
CockroachDB built-ins (``now()``, ``unique_rowid()``, ``gen_random_uuid()``) and CQL's (``now()``
as a timeuuid, ``uuid()``, ``toTimestamp``). Each takes evaluated Python arguments.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import os
import platform
import threading
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from changefeed.engine.clock import CommitTs
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import UTC
from changefeed.exceptions import InvalidStatement, NumericValueOutOfRange, UndefinedFunction
from changefeed.sql.arithmetic import INT64_MIN
from changefeed.sql.builtins import BUILTINS
from changefeed.sql.cql_functions import CQL_FUNCTIONS, timeuuid_time
from changefeed.sql.interval_functions import age
from changefeed.sql.phoenix_functions import FUNCTIONS as PHOENIX_FUNCTIONS
from changefeed.sql.text_out import to_text
from changefeed.sql.time_templates import is_postgres_call, pg_to_date, pg_to_timestamp

#: The CockroachDB release whose behaviour the SQL dialect and the PostgreSQL endpoint follow.
#: ``version()`` names it the way CockroachDB's build string does (tools such as the SQLAlchemy
#: and Django adapters, Flyway and Liquibase parse ``CockroachDB CCL v<major>.<minor>.<patch>``);
#: the endpoint reports it as ``crdb_version`` and, as CockroachDB does, ``server_version`` 13.0.0.
CRDB_RELEASE = "v25.2.0"


@functools.cache
def version_string() -> str:
    """``version()``: ``CockroachDB CCL v25.2.0 (x86_64-pc-linux-gnu, built with changefeed 0.1.0,
    Python 3.11.2)``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("changefeed")
    except PackageNotFoundError:  # running from a source tree
        ours = "0+unknown"
    machine = platform.machine() or "unknown"
    system = platform.system().lower()
    target = f"{machine}-pc-linux-gnu" if system == "linux" else f"{machine}-{system}"
    return (
        f"CockroachDB CCL {CRDB_RELEASE} ({target}, built with changefeed {ours}, "
        f"Python {platform.python_version()})"
    )


_rowid_lock = threading.Lock()
_rowid_counter = itertools.count()
_NODE = os.getpid() & 0x7FFF


def unique_rowid() -> int:
    """CockroachDB-style unique_rowid(): microseconds since the epoch shifted left, plus a node id
    and a counter; increasing within a process and unique across processes."""
    with _rowid_lock:
        n = next(_rowid_counter) & 0x3F
    return ((time.time_ns() // 1000) << 14 | (_NODE << 6) % (1 << 14) | n) & ((1 << 63) - 1)


def _typed(type_name: str, params: tuple[int, ...] = ()) -> Callable[..., Any]:
    t = resolve_type(type_name, params, dialect="sql")

    def make(*args: Any) -> Any:
        if len(args) != 1:
            raise InvalidStatement(f"{type_name}() takes exactly one argument")
        return t.coerce(args[0], f"{type_name}()")

    return make


def _decimal(*args: Any) -> Decimal:
    if len(args) not in (1, 3):
        raise InvalidStatement("Decimal() takes (value, precision, scale)")
    params = (int(args[1]), int(args[2])) if len(args) == 3 else (22, 9)
    t = resolve_type("Decimal", params, dialect="sql")
    return t.coerce(args[0], "Decimal()")  # type: ignore[no-any-return]


def _now_ts(ctx: EvalContext) -> dt.datetime:
    return dt.datetime.fromtimestamp(ctx.now_ns / 1e9, tz=UTC)


class EvalContext:
    """What functions may need from the running statement: its time and dialect; ``phoenix``:
    Apache Phoenix semantics (CDC queries), whose ``CURRENT_DATE()`` is a DATE with its time of
    day and whose dates move by (fractions of) days (:mod:`changefeed.sql.arithmetic`)."""

    def __init__(
        self, now_ns: int, dialect: str, ts: CommitTs | None = None, *, phoenix: bool = False
    ) -> None:
        self.now_ns = now_ns
        self.dialect = dialect
        self.ts = ts
        self.phoenix = phoenix


def _abs(x: Any) -> Any:
    if type(x) is int and x == INT64_MIN:  # its absolute value is past INT8
        raise NumericValueOutOfRange("integer out of range")
    return abs(x)


_PURE: dict[str, Callable[..., Any]] = {
    name.lower(): _typed(name)
    for name in (
        "Bool", "Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16", "Uint32", "Uint64", "Float",
        "Double", "String", "Utf8", "Date", "Datetime", "Timestamp", "Interval", "Json",
        "JsonDocument", "Uuid",
    )
}  # fmt: skip
_PURE["decimal"] = _decimal
_PURE["tztimestamp"] = _typed("Timestamp")
_PURE["lower"] = lambda s: None if s is None else str(s).lower()
_PURE["upper"] = lambda s: None if s is None else str(s).upper()
_PURE["length"] = lambda s: None if s is None else len(s)
_PURE["abs"] = lambda x: None if x is None else _abs(x)
_PURE["coalesce"] = lambda *xs: next((x for x in xs if x is not None), None)
_PURE["concat"] = lambda *xs: "".join("" if x is None else to_text(x) for x in xs)
_PURE["totimestamp"] = lambda x: x if isinstance(x, dt.datetime) else timeuuid_time(x)
_PURE["todate"] = lambda x: (x if isinstance(x, dt.datetime) else timeuuid_time(x)).date()
_PURE["tounixtimestamp"] = lambda x: int(
    ((x if isinstance(x, dt.datetime) else timeuuid_time(x)).timestamp()) * 1000
)

# Apache Phoenix (issue 11): TO_DATE, TO_TIMESTAMP.
_PURE.update(PHOENIX_FUNCTIONS)
# CQL: minTimeuuid/maxTimeuuid, dateOf, blobAsText ..
_PURE.update(CQL_FUNCTIONS)
# PostgreSQL's and CockroachDB's string, number and date functions (those above keep theirs).
for _name, _fn in BUILTINS.items():
    _PURE.setdefault(_name, _fn)


def call(name: str, args: list[Any], ctx: EvalContext) -> Any:
    """Evaluate scalar function ``name`` on already evaluated ``args``."""
    key = name.lower()
    if key == "uuid" and not args:  # CQL's uuid(): a random one (YDB's Uuid(x) is a cast)
        return uuid.uuid4()
    if key == "age" and len(args) == 1 and args[0] is not None:  # since midnight today
        return age(_now_ts(ctx).date(), args[0])
    if key in ("to_date", "to_timestamp") and is_postgres_call(tuple(args), ctx.phoenix):
        return pg_to_date(*args) if key == "to_date" else pg_to_timestamp(*args)
    fn = _PURE.get(key)
    if fn is not None:
        return fn(*args)
    if key in (
        "now",
        "current_timestamp",
        "currentutctimestamp",
        "statement_timestamp",
        "transaction_timestamp",
        "currenttimestamp",
    ):
        if key == "now" and ctx.dialect == "cql":
            return (ctx.ts or CommitTs(ctx.now_ns)).timeuuid(uuid.getnode())
        return _now_ts(ctx)
    if key in ("current_date", "current_time") and ctx.phoenix:
        # Phoenix's DATE and TIME hold the instant to the millisecond (GMT, zone-less)
        now = _now_ts(ctx).replace(tzinfo=None)
        return now.replace(microsecond=now.microsecond // 1000 * 1000)
    if key in ("currentutcdate", "current_date", "currentdate"):
        return _now_ts(ctx).date()
    if key in ("current_time", "localtime") and not args:  # the session's zone is UTC
        return _now_ts(ctx).time()
    if key == "localtimestamp" and not args:
        return _now_ts(ctx).replace(tzinfo=None)
    if key in ("currentutcdatetime",):
        return _now_ts(ctx).replace(microsecond=0)
    if key == "unique_rowid":
        return unique_rowid()
    if key == "version" and not args and ctx.dialect == "sql":
        return version_string()
    if key == "cluster_logical_timestamp" and not args and ctx.dialect == "sql":
        # CockroachDB: the transaction's timestamp as an HLC decimal (wall ns . 10 logical digits)
        return Decimal((ctx.ts or CommitTs(ctx.now_ns)).crdb())
    if key in ("gen_random_uuid", "uuid_generate_v4", "uuid", "randomuuid", "random_uuid"):
        return uuid.uuid4()
    if key in ("currenttimeuuid", "timeuuid"):
        return uuid.uuid1()
    raise UndefinedFunction(f"unknown function: {name}()")


#: Set-returning functions (``sql.statements.table_functions``): in FROM, or at the top of a
#: SELECT list, where each row is repeated for their values.
SET_RETURNING = frozenset(
    {"generate_series", "unnest", "jsonb_object_keys", "json_object_keys", "jsonb_array_elements",
     "json_array_elements", "jsonb_array_elements_text", "json_array_elements_text",
     "regexp_split_to_table", "regexp_matches", "jsonb_each", "json_each", "jsonb_each_text",
     "json_each_text"}
)  # fmt: skip
#: Functions that exist only with ``OVER`` (``sql.statements.windows``); aggregates take one too.
WINDOW_FUNCTIONS = frozenset(
    {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
     "first_value", "last_value", "nth_value"}
)  # fmt: skip
AGGREGATES = {"count", "min", "max", "sum", "avg", "string_agg", "array_agg", "bool_and", "bool_or", "every",
              "variance", "var_samp", "var_pop", "stddev", "stddev_samp", "stddev_pop",
              "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg"}  # fmt: skip
