"""Apache Phoenix's date functions: ``TO_DATE``, ``TO_TIMESTAMP`` (``ToDateFunction``).

``TO_DATE(string [, format [, time zone]])``: without a format Phoenix parses leniently as ISO
(a date, then an optional space or ``T`` and a time, then an optional zone offset); a format is a
``java.text.SimpleDateFormat`` pattern. The time zone defaults to ``GMT`` (Phoenix's
``phoenix.query.dateFormatTimeZone``); ``'local'`` is the machine's zone. Results are naive
datetimes in GMT, as Phoenix's ``DATE``/``TIMESTAMP`` values are zone-less instants.
A string that does not parse raises Phoenix's ``ILLEGAL_DATA`` (201, ``22000``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from changefeed.engine.type_errors import sql_text
from changefeed.exceptions import PhoenixIllegalData

DEFAULT_FORMAT = "yyyy-MM-dd HH:mm:ss.SSS"
DEFAULT_TIME_ZONE = "GMT"

_ISO = re.compile(
    r"^\s*(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[ T](?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<z>Z|[+-]\d{2}(?::?\d{2})?)?\s*$",
    re.I,
)

# SimpleDateFormat letters -> (named group, pattern)
_FIELDS: dict[str, tuple[str, str]] = {
    "y": ("y", r"\d{1,4}"),
    "M": ("mo", r"\d{1,2}"),
    "d": ("d", r"\d{1,2}"),
    "H": ("h", r"\d{1,2}"),
    "m": ("mi", r"\d{1,2}"),
    "s": ("s", r"\d{1,2}"),
    "S": ("f", r"\d{1,9}"),
    "Z": ("z", r"[+-]\d{4}|Z"),
    "X": ("z", r"[+-]\d{2}(?::?\d{2})?|Z"),
}


def _format_regex(fmt: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "'":
            j = fmt.find("'", i + 1)
            if j < 0:
                raise PhoenixIllegalData(f' Bad date format "{fmt}": unterminated quote')
            out.append(re.escape(fmt[i + 1 : j]) if j > i + 1 else "'")
            i = j + 1
            continue
        if ch.isalpha():
            j = i
            while j < len(fmt) and fmt[j] == ch:
                j += 1
            field = _FIELDS.get(ch)
            if field is None:
                raise PhoenixIllegalData(f' Bad date format "{fmt}": unsupported pattern letter {ch}')
            name, pat = field
            if ch in "yMdHms" and j - i >= 2 and ch != "y":
                pat = rf"\d{{{j - i}}}"
            out.append(f"(?P<{name}>{pat})")
            i = j
            continue
        out.append(re.escape(ch))
        i += 1
    return re.compile("^\\s*" + "".join(out) + "\\s*$")


def _zone(tz: str | None) -> dt.tzinfo:
    if tz is None or tz.upper() in ("GMT", "UTC", "Z"):
        return dt.UTC
    if tz.lower() == "local":
        local = dt.datetime.now().astimezone().tzinfo
        return local or dt.UTC
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise PhoenixIllegalData(f' Unknown time zone "{tz}"') from None


def _offset(text: str) -> dt.tzinfo:
    if text.upper() == "Z":
        return dt.UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))


def parse_date(value: Any, fmt: str | None = None, tz: str | None = None) -> dt.datetime | None:
    """``TO_DATE``: a naive datetime in GMT (None for NULL input)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
    if not isinstance(value, str):
        raise PhoenixIllegalData(f" TO_DATE expects a string, not {sql_text(value)}")
    m = _ISO.match(value) if fmt is None else _format_regex(fmt).match(value)
    if m is None:
        raise PhoenixIllegalData(f' Unparseable date: "{value}"')
    g = m.groupdict()
    try:
        frac = (g.get("f") or "0").ljust(6, "0")[:6]
        year = int(g.get("y") or 1970)
        local = dt.datetime(
            year,
            int(g.get("mo") or 1),
            int(g.get("d") or 1),
            int(g.get("h") or 0),
            int(g.get("mi") or 0),
            int(g.get("s") or 0),
            int(frac),
        )
    except ValueError:
        raise PhoenixIllegalData(f' Unparseable date: "{value}"') from None
    zone = _offset(g["z"]) if g.get("z") else _zone(tz)
    return local.replace(tzinfo=zone).astimezone(dt.UTC).replace(tzinfo=None)


def _to_date(*args: Any) -> dt.datetime | None:
    if not 1 <= len(args) <= 3:
        raise PhoenixIllegalData(" TO_DATE takes (string [, format [, time zone]])")
    fmt = args[1] if len(args) > 1 else None
    tz = args[2] if len(args) > 2 else DEFAULT_TIME_ZONE
    if fmt is not None and not isinstance(fmt, str):
        raise PhoenixIllegalData(f" TO_DATE format must be a string, not {sql_text(fmt)}")
    parsed = parse_date(args[0], fmt, tz)
    if parsed is None:
        return None
    return parsed.replace(microsecond=parsed.microsecond // 1000 * 1000)  # DATE: milliseconds


def _to_timestamp(*args: Any) -> dt.datetime | None:
    if not 1 <= len(args) <= 3:
        raise PhoenixIllegalData(" TO_TIMESTAMP takes (string [, format [, time zone]])")
    fmt = args[1] if len(args) > 1 else None
    tz = args[2] if len(args) > 2 else DEFAULT_TIME_ZONE
    return parse_date(args[0], fmt, tz)


#: Name (lower case) -> implementation, merged into ``changefeed.sql.functions``.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "to_date": _to_date,
    "to_timestamp": _to_timestamp,
}

__all__ = ["DEFAULT_FORMAT", "DEFAULT_TIME_ZONE", "FUNCTIONS", "parse_date"]
