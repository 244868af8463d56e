"""CockroachDB's CSV changefeed format (``format = csv``, ``encoder_csv.go``), registered as ``crdb-csv``.

CockroachDB allows it only with ``initial_scan_only`` (``format=csv is only usable with
initial_scan_only``): a CSV changefeed is an export. Each message has an empty key and a value of
one CSV record, no line terminator (the sinks add one per message):

* every column of the table in table order, each written as ``tree.FmtExport`` prints it: bare
  strings, ``NULL`` for SQL NULL, ``true``/``false``, integers in full, floats in Go's shortest
  ``%g`` form (``0.5``, ``100``, ``1e+21``, ``NaN``, ``+Inf``), decimals keeping their scale,
  bytes as ``\\x`` hex, dates ``2019-01-02``, timestamps ``2019-01-02 03:04:05.5`` (``+00:00``
  for TIMESTAMPTZ), JSON as its text;
* quoting as Go's ``encoding/csv`` writer: a field is quoted when it contains ``,``, ``"``,
  ``\\r`` or ``\\n``, starts with a white-space character or is exactly ``\\.``; inside quotes
  ``"`` is doubled; the empty string is not quoted.

A deleted row cannot be written (``cannot encode deleted rows into CSV format``) and there is no
resolved message (``EncodeResolvedTimestamp is not supported with the CSV encoder``).

The Spark face runs the Python face over Arrow batches (``mapInArrow``): Go's float and time
layouts have no Spark built-in equivalent, and a CSV feed is a one-time export whose cost is the
scan, so the two faces are one function and cannot disagree.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind
from changefeed.exceptions import InvalidOption
from changefeed.formats.base import Encoder, Record, map_records, partition_of, register

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.engine.types import SqlType
    from changefeed.feeds.spec import FeedSpec

DELETED_ROW_ERROR = "cannot encode deleted rows into CSV format"
RESOLVED_ERROR = "EncodeResolvedTimestamp is not supported with the CSV encoder"
NULL = "NULL"

_NEEDS_QUOTES = (",", '"', "\r", "\n")


def csv_field(s: str) -> str:
    """One field as Go's ``csv.Writer`` writes it."""
    if s == "":
        return s
    if s == "\\." or any(c in s for c in _NEEDS_QUOTES) or s[0].isspace():
        return '"' + s.replace('"', '""') + '"'
    return s


def go_float(x: float) -> str:
    """``strconv.FormatFloat(x, 'g', -1, 64)``: shortest digits, exponent form when the decimal
    exponent is below -4 or at least 21."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    digits, exp = _shortest(abs(x))
    sign = "-" if x < 0 else ""
    if exp < -4 or exp >= 21:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _shortest(ax: float) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first digit) of ``repr(ax)``."""
    r = repr(ax)
    mant, _, e = r.partition("e")
    exp = int(e) if e else 0
    intpart, _, frac = mant.partition(".")
    if frac == "0":
        frac = ""
    digits = (intpart + frac).lstrip("0")
    lead = len(intpart.lstrip("0")) if intpart.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    exp += lead - 1
    return digits.rstrip("0") or "0", exp


def _frac(us: int) -> str:
    return f".{us:06d}".rstrip("0") if us else ""


def export_text(v: Any, t: SqlType) -> str:
    """A value as ``tree.FmtExport`` prints it (before CSV quoting)."""
    if v is None:
        return NULL
    k = t.kind
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, int | Decimal):
        return str(v)
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    if isinstance(v, dt.datetime):
        text = v.strftime("%Y-%m-%d %H:%M:%S") + _frac(v.microsecond)
        return text + "+00:00" if t.zoned else text
    if isinstance(v, dt.date):
        return v.isoformat()
    if k is Kind.TIME and isinstance(v, int):
        secs, ns = divmod(v, 1_000_000_000)
        return f"{secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}" + _frac(ns // 1000)
    if k is Kind.INTERVAL and isinstance(v, int):
        return str(dt.timedelta(microseconds=v))
    if k is Kind.ARRAY and isinstance(v, str) and t.element is not None:
        el = t.element
        items = orjson.loads(v)
        return "{" + ",".join(export_text(x, el) for x in items) + "}"
    return str(v)


def _columns(table: TableSchema) -> list[Any]:
    return [c for c in table.columns if not c.virtual]


def _arrow_values(col: pa.Array | pa.ChunkedArray, t: SqlType) -> list[Any]:
    return list(col.to_pylist())


class CrdbCsvEncoder(Encoder):
    name = "crdb-csv"

    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        return self._encode(batch, table, feed, evaluated=False)

    def _encode(
        self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, *, evaluated: bool
    ) -> list[Record]:
        """A CDC query's rows are its projection (its predicate applied first, here or, on
        Spark, as column expressions before this runs: ``evaluated``)."""
        from changefeed.formats.cdc_eval import evaluate_batch, output_columns

        if feed.query is not None and not evaluated:
            batch = evaluate_batch(feed.query, batch, table, diff=False)
        n = batch.num_rows
        if n == 0:
            return []
        ops = batch.column("op").to_pylist()
        if CHANGE_ERASE in ops:
            raise InvalidOption(DELETED_ROW_ERROR)
        cols = list(output_columns(feed.query)) if feed.query is not None else _columns(table)
        texts = [
            [csv_field(export_text(v, c.type)) for v in _arrow_values(batch.column(c.db), c.type)]
            for c in cols
        ]
        ts = batch.column("ts").to_pylist()
        part = partition_of(b"", feed.partitions)
        return [(part, b"", ",".join(col[i] for col in texts).encode(), int(ts[i])) for i in range(n)]

    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from changefeed.formats.cdc_eval import apply_spark

        evaluated = feed.query is not None
        if feed.query is not None:
            df = apply_spark(feed.query, df, table, diff=False)

        return map_records(df, lambda b: self._encode(b, table, feed, evaluated=evaluated))

    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        raise InvalidOption(RESOLVED_ERROR)


@register("crdb-csv")
def _factory() -> Encoder:
    return CrdbCsvEncoder()
