"""PostgreSQL's string functions beyond ``builtins``: ``overlay`` (also written ``overlay(s
PLACING r FROM n [FOR m])``), ``bit_length``, ``quote_literal`` and ``quote_nullable``, and the
constructors of dates and times, ``make_date``, ``make_time``, ``make_timestamp``, each with
PostgreSQL's errors."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from changefeed.exceptions import DatetimeFieldOverflow
from changefeed.sql.function_errors import invalid_argument, unknown_signature
from changefeed.sql.text_out import to_text

__all__ = ["TEXT_FUNCTIONS"]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) or type(v).__name__ == "Decimal"


def _overlay(*args: Any) -> Any:
    """``overlay(s, r, start [, count])``: ``s`` with ``count`` characters (bytes) from
    ``start`` replaced by ``r``; ``count`` is ``r``'s length when left out."""
    if len(args) not in (3, 4):
        raise unknown_signature("overlay", args)
    if any(a is None for a in args):
        return None
    s: Any = args[0]
    r: Any = args[1]
    start = args[2]
    count = args[3] if len(args) == 4 else len(r)
    if not (type(s) is type(r) and type(s) in (str, bytes) and _int(start) and _int(count)):
        raise unknown_signature("overlay", args)
    if start - 1 < 0:
        raise invalid_argument("negative substring length not allowed", "22011")
    return s[: start - 1] + r + s[max(start + count - 1, 0) :]


def _bit_length(*args: Any) -> Any:
    if len(args) != 1:
        raise unknown_signature("bit_length", args)
    (v,) = args
    if v is None:
        return None
    if isinstance(v, str):
        return len(v.encode()) * 8
    if isinstance(v, bytes):
        return len(v) * 8
    raise unknown_signature("bit_length", args)


def _literal(v: Any) -> str:
    """A value as a quoted SQL literal: quotes doubled; with a backslash, an ``E''`` string
    with the backslashes doubled too, as PostgreSQL's ``quote_literal``."""
    s = to_text(v)
    if "\\" in s:
        return "E'" + s.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + s.replace("'", "''") + "'"


def _quote_literal(*args: Any) -> Any:
    if len(args) != 1:
        raise unknown_signature("quote_literal", args)
    return None if args[0] is None else _literal(args[0])


def _quote_nullable(*args: Any) -> Any:
    if len(args) != 1:
        raise unknown_signature("quote_nullable", args)
    return "NULL" if args[0] is None else _literal(args[0])


def _date(year: int, month: int, day: int) -> dt.date:
    try:
        return dt.date(year, month, day)
    except ValueError:
        raise DatetimeFieldOverflow(f"date field value out of range: {year}-{month:02d}-{day:02d}") from None


def _time(hour: int, minute: int, second: Any) -> dt.time:
    sec = float(second)
    whole = math.floor(sec) if math.isfinite(sec) else -1
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= sec < 60) or whole < 0:
        raise DatetimeFieldOverflow(f"time field value out of range: {hour}:{minute:02d}:{_seconds(second)}")
    micros = round((sec - whole) * 1_000_000)
    if micros == 1_000_000:  # 59.9999999 rounds to the next second, which a time of day lacks
        raise DatetimeFieldOverflow(f"time field value out of range: {hour}:{minute:02d}:{_seconds(second)}")
    return dt.time(hour, minute, whole, micros)


def _seconds(v: Any) -> str:
    f = float(v)
    return f"{f:09.6f}".rstrip("0").rstrip(".") if f != int(f) else f"{int(f):02d}"


def _make_date(*args: Any) -> Any:
    if len(args) != 3:
        raise unknown_signature("make_date", args)
    if any(a is None for a in args):
        return None
    if not all(_int(a) for a in args):
        raise unknown_signature("make_date", args)
    return _date(*args)


def _make_time(*args: Any) -> Any:
    if len(args) != 3:
        raise unknown_signature("make_time", args)
    if any(a is None for a in args):
        return None
    if not (_int(args[0]) and _int(args[1]) and _number(args[2])):
        raise unknown_signature("make_time", args)
    return _time(*args)


def _make_timestamp(*args: Any) -> Any:
    if len(args) != 6:
        raise unknown_signature("make_timestamp", args)
    if any(a is None for a in args):
        return None
    if not (all(_int(a) for a in args[:5]) and _number(args[5])):
        raise unknown_signature("make_timestamp", args)
    day = _date(*args[:3])
    if args[3] == 24 and args[4] == 0 and float(args[5]) == 0:  # 24:00:00: the next midnight
        return dt.datetime.combine(day, dt.time()) + dt.timedelta(days=1)
    return dt.datetime.combine(day, _time(*args[3:]))


TEXT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "overlay": _overlay,
    "bit_length": _bit_length,
    "quote_literal": _quote_literal,
    "quote_nullable": _quote_nullable,
    "make_date": _make_date,
    "make_time": _make_time,
    "make_timestamp": _make_timestamp,
}
