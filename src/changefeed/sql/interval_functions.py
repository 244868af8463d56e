"""PostgreSQL's (and CockroachDB's) functions of calendar intervals: ``age``, ``make_interval``,
``justify_days``/``justify_hours``/``justify_interval``, and ``extract`` of an interval's
fields. Intervals of months are :class:`changefeed.engine.intervals.Interval`, others
``timedelta`` (see that module)."""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from changefeed.engine.intervals import DAYS_PER_MONTH, Interval, fields as interval_fields, interval_of
from changefeed.exceptions import UnsupportedFeature
from changefeed.sql.function_errors import unknown_signature

__all__ = ["INTERVAL_FUNCTIONS", "age", "extract_interval"]

_US_PER_DAY = 86_400_000_000
_US_PER_HOUR = 3_600_000_000


def _instant(v: Any, name: str) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    raise unknown_signature(name, (v,))


def age(a: Any, b: Any) -> Interval | dt.timedelta:
    """``age(a, b)``: ``a - b`` in years, months and days ("symbolic", as PostgreSQL's
    ``timestamp_age``): field by field, borrowing the days of the earlier one's month when the
    days go negative."""
    x, y = _instant(a, "age"), _instant(b, "age")
    if (x.tzinfo is None) != (y.tzinfo is None):
        x, y = x.replace(tzinfo=None), y.replace(tzinfo=None)
    if x.tzinfo is not None:
        x, y = x.astimezone(dt.UTC), y.astimezone(dt.UTC)
    sign = 1
    if x < y:  # PostgreSQL works on the positive difference and negates the result
        x, y, sign = y, x, -1
    micros = (
        (x.hour - y.hour) * _US_PER_HOUR
        + (x.minute - y.minute) * 60_000_000
        + (x.second - y.second) * 1_000_000
        + (x.microsecond - y.microsecond)
    )
    days = x.day - y.day
    months = x.month - y.month
    years = x.year - y.year
    if micros < 0:
        micros += _US_PER_DAY
        days -= 1
    while days < 0:
        days += calendar.monthrange(y.year, y.month)[1]
        months -= 1
    if months < 0:
        months += 12
        years -= 1
    return interval_of(sign * (years * 12 + months), sign * days, sign * micros)


def _age(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("age", args)
    if any(a is None for a in args):
        return None
    return age(args[0], args[1])


def _make_interval(*args: Any) -> Any:
    """``make_interval(years, months, weeks, days, hours, mins, secs)``, each optional (0)."""
    if len(args) > 7:
        raise unknown_signature("make_interval", args)
    if any(a is None for a in args):
        return None
    vals = [*args, *([0] * (7 - len(args)))]
    for v in vals[:6]:
        if not isinstance(v, int) or isinstance(v, bool):
            raise unknown_signature("make_interval", args)
    if not isinstance(vals[6], int | float | Decimal) or isinstance(vals[6], bool):
        raise unknown_signature("make_interval", args)
    years, months, weeks, days, hours, mins = vals[:6]
    secs = Decimal(repr(vals[6])) if isinstance(vals[6], float) else Decimal(vals[6])
    micros = (hours * 3600 + mins * 60) * 1_000_000 + int(secs * 1_000_000)
    return interval_of(years * 12 + months, weeks * 7 + days, micros)


def _one_interval(name: str, args: tuple[Any, ...]) -> tuple[int, int, int] | None:
    if len(args) != 1:
        raise unknown_signature(name, args)
    if args[0] is None:
        return None
    if not isinstance(args[0], Interval | dt.timedelta):
        raise unknown_signature(name, args)
    return interval_fields(args[0])


def _c_div(a: int, b: int) -> tuple[int, int]:
    """C's division (truncated toward zero) and remainder, as PostgreSQL's justify functions."""
    q = abs(a) // b
    q = q if a >= 0 else -q
    return q, a - q * b


def _carry(high: int, low: int, unit: int) -> tuple[int, int]:
    """``low`` carried into ``high`` every ``unit`` (C's truncating division), then the two
    given one sign: a ``low`` of the other sign than ``high`` borrows one ``unit`` back."""
    more, low = _c_div(low, unit)
    high += more
    if high > 0 and low < 0:
        return high - 1, low + unit
    if high < 0 and low > 0:
        return high + 1, low - unit
    return high, low


def _justify_days(*args: Any) -> Any:
    """Every 30 days a month."""
    f = _one_interval("justify_days", args)
    if f is None:
        return None
    months, days, micros = f
    months, days = _carry(months, days, DAYS_PER_MONTH)
    return interval_of(months, days, micros)


def _justify_hours(*args: Any) -> Any:
    """Every 24 hours a day."""
    f = _one_interval("justify_hours", args)
    if f is None:
        return None
    months, days, micros = f
    days, micros = _carry(days, micros, _US_PER_DAY)
    return interval_of(months, days, micros)


def _justify_interval(*args: Any) -> Any:
    """Both, with the signs of all fields made to agree (PostgreSQL's order: hours into days,
    days into months, the months' sign against days and time, then days against time)."""
    f = _one_interval("justify_interval", args)
    if f is None:
        return None
    months, days, micros = f
    more, micros = _c_div(micros, _US_PER_DAY)
    more, days = _c_div(days + more, DAYS_PER_MONTH)
    months += more
    if months > 0 and (days < 0 or (days == 0 and micros < 0)):
        months, days = months - 1, days + DAYS_PER_MONTH
    elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
        months, days = months + 1, days - DAYS_PER_MONTH
    days, micros = _carry(days, micros, _US_PER_DAY)
    return interval_of(months, days, micros)


#: extract(field FROM interval): PostgreSQL's interval_part, by field.
_FIELDS: dict[str, Callable[[int, int, int], Any]] = {
    "millennium": lambda mo, d, us: int(mo / 12 / 1000),
    "century": lambda mo, d, us: int(mo / 12 / 100),
    "decade": lambda mo, d, us: int(mo / 12 / 10),
    "year": lambda mo, d, us: _tdiv(mo, 12),
    "quarter": lambda mo, d, us: _tdiv(_rem(mo, 12), 3) + 1,
    "month": lambda mo, d, us: _rem(mo, 12),
    "day": lambda mo, d, us: d,
    "hour": lambda mo, d, us: _tdiv(us, _US_PER_HOUR),
    "minute": lambda mo, d, us: _rem(_tdiv(us, 60_000_000), 60),
    "second": lambda mo, d, us: Decimal(_rem(us, 60_000_000)) / 1_000_000,
    "millisecond": lambda mo, d, us: Decimal(_rem(us, 60_000_000)) / 1000,
    "microsecond": lambda mo, d, us: _rem(us, 60_000_000),
    "epoch": lambda mo, d, us: (
        Decimal(int(mo / 12)) * Decimal("31557600")  # 365.25 days a year
        + Decimal(mo - 12 * int(mo / 12)) * DAYS_PER_MONTH * 86400
        + Decimal(d) * 86400
        + Decimal(us) / 1_000_000
    ),
}


def _tdiv(a: int, b: int) -> int:
    """Integer division truncated toward zero (C's)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _rem(a: int, b: int) -> int:
    """C's remainder: the dividend's sign."""
    return a - b * _tdiv(a, b)


def extract_interval(field: str, v: Interval | dt.timedelta) -> Any:
    """``extract(field FROM v)``; a field intervals do not have is 22023."""
    fn = _FIELDS.get(field.lower())
    if fn is None:
        raise UnsupportedFeature(f'unit "{field.lower()}" not supported for type interval')
    months, days, micros = interval_fields(v)
    out = fn(months, days, micros)
    places = _PLACES.get(field.lower())
    if places is not None:  # PostgreSQL 14+: seconds and the epoch to the microsecond
        return Decimal(out).quantize(Decimal(1).scaleb(-places))
    return Decimal(out) if not isinstance(out, Decimal) else out


#: The digits after the point of the fields that have a fraction.
_PLACES = {"second": 6, "epoch": 6, "millisecond": 3}


INTERVAL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "age": _age,
    "make_interval": _make_interval,
    "justify_days": _justify_days,
    "justify_hours": _justify_hours,
    "justify_interval": _justify_interval,
}
