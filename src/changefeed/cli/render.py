"""Render results the way cqlsh (CQL) and psql/cockroach sql (SQL) print them. Pure functions."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import orjson

from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedError
from changefeed.sql.result import Result


def cql_value(v: Any, t: SqlType | None = None) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        digits = 5 if t is not None and t.kind is Kind.FLOAT and t.bits == 32 else 12
        text: str = format(v, f".{digits}g")
        return text
    if isinstance(v, bytes):
        return "0x" + v.hex()
    if isinstance(v, dt.datetime):
        stamp: dt.datetime = v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
        return stamp.strftime("%Y-%m-%d %H:%M:%S.%f%z")
    if isinstance(v, dt.time):
        return v.strftime("%H:%M:%S.%f") + "000"
    if isinstance(v, dt.timedelta):
        return _duration(v)
    if isinstance(v, list):
        return "[" + ", ".join(_quoted(x, t.element if t else None) for x in v) + "]"
    return str(v)


def _quoted(v: Any, t: SqlType | None) -> str:
    return f"'{v}'" if isinstance(v, str) else cql_value(v, t)


def _duration(v: dt.timedelta) -> str:
    us = v.days * 86_400_000_000 + v.seconds * 1_000_000 + v.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    out = []
    for unit, size in (
        ("d", 86_400_000_000),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("us", 1),
    ):
        q, us = divmod(us, size)
        if q:
            out.append(f"{q}{unit}")
    return sign + ("".join(out) or "0s")


def _widths(headers: list[str], cells: list[list[str]]) -> list[int]:
    """Each column as wide as its header or its widest cell."""
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    return widths


def _rule(widths: list[int]) -> str:
    """The dashed line under the header, as cqlsh and psql draw it."""
    return "-" + "-+-".join("-" * w for w in widths) + "-"


def render_cql(res: Result) -> str:
    """cqlsh's table: headers left-justified, values right-justified, then ``(N rows)``."""
    types = res.types or [None] * len(res.columns)
    cells = [[cql_value(v, t) for v, t in zip(row, types, strict=False)] for row in res.rows]
    widths = _widths(res.columns, cells)
    lines = [(" " + " | ".join(h.ljust(w) for h, w in zip(res.columns, widths, strict=True))).rstrip()]
    lines.append(_rule(widths))
    for row in cells:
        lines.append(" " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    lines.append("")
    lines.append(f"({len(res.rows)} rows)")
    return "\n".join(lines)


def sql_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    if isinstance(v, dt.datetime):
        s = v.isoformat(sep=" ")
        return s.replace("+00:00", "+00")
    if isinstance(v, list):
        return "{" + ",".join(sql_value(x) for x in v) + "}"
    return str(v)


def render_sql(res: Result) -> str:
    """psql-style table: centered headers, numbers right-aligned, text left-aligned."""
    cells = [[sql_value(v) for v in row] for row in res.rows]
    numeric = [
        all(isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in col if v is not None)
        and any(v is not None for v in col)
        for col in (zip(*res.rows, strict=True) if res.rows else [[] for _ in res.columns])
    ]
    widths = _widths(res.columns, cells)
    lines = [(" " + " | ".join(h.center(w) for h, w in zip(res.columns, widths, strict=True))).rstrip()]
    lines.append(_rule(widths))
    for row in cells:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric, strict=True)]
        lines.append((" " + " | ".join(parts)).rstrip())
    n = len(res.rows)
    lines.append(f"({n} row{'' if n == 1 else 's'})")
    return "\n".join(lines)


def _json_default(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, uuid.UUID):
        return str(v)
    raise TypeError(type(v).__name__)


def render_json_rows(res: Result) -> list[str]:
    """One JSON object per row, keys in column order."""
    return [
        orjson.dumps(
            dict(zip(res.columns, row, strict=True)),
            default=_json_default,
            option=orjson.OPT_PASSTHROUGH_DATACLASS,
        ).decode()
        for row in res.rows
    ]


def error_line(exc: BaseException) -> str:
    """What the CLI prints for an error: ``ERROR: <message>``, and ``DETAIL: <detail>`` on a line
    of its own when the error has one (as psql shows them); an Apache Phoenix error, which starts
    ``ERROR 1012 (42M03): ...`` as Phoenix prints it, is shown as it is."""
    text = str(exc)
    line = text if text.startswith("ERROR ") else f"ERROR: {text}"
    detail = exc.detail if isinstance(exc, ChangefeedError) else None
    return f"{line}\nDETAIL: {detail}" if detail else line
