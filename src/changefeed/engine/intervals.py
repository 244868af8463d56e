"""Intervals of months and years: PostgreSQL's and CockroachDB's calendar intervals.

An interval without months is a :class:`datetime.timedelta` everywhere in the engine (its days
and time of day folded together, as they always were here). One that counts months or years
(``'1 month'``, ``'2 years 3 days'``, ``age(..)``) is an :class:`Interval` of three fields, as
PostgreSQL keeps it (``months``, ``days``, ``micros``), because a month is no fixed number of
days: ``date '2024-01-31' + interval '1 month'`` is 2024-02-29. Only where two intervals are
compared (or a month must become a length: ``extract(epoch ..)``) does a month count as 30 days,
as in PostgreSQL, so ``interval '1 month' = interval '30 days'`` is true.

This module reads the text forms (PostgreSQL's units and clock, ``ago``, ISO 8601 with years and
months), prints PostgreSQL's ``IntervalStyle = postgres`` output, and does the calendar
arithmetic. Storing one in an INTERVAL column is refused (the column keeps microseconds).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from changefeed.exceptions import DatetimeFieldOverflow, InvalidDatetimeFormat

__all__ = [
    "DAYS_PER_MONTH",
    "Interval",
    "add_interval",
    "add_months",
    "combine",
    "fields",
    "interval_of",
    "parse_calendar",
    "scale",
    "text",
]

#: A month's length where one must have one (comparison, extract(epoch)): PostgreSQL's.
DAYS_PER_MONTH = 30
_US_PER_DAY = 86_400_000_000


@dataclass(frozen=True, slots=True, eq=False)
class Interval:
    """An interval with months (see the module): each field signed on its own, as in PostgreSQL
    (``'1 mon -2 days'``)."""

    months: int
    days: int = 0
    micros: int = 0

    @property
    def key(self) -> int:
        """Its length in microseconds, a month being 30 days (how PostgreSQL compares them)."""
        return (self.months * DAYS_PER_MONTH + self.days) * _US_PER_DAY + self.micros

    def _other(self, other: object) -> int | None:
        if isinstance(other, Interval):
            return other.key
        if isinstance(other, dt.timedelta):
            return (other.days * 86_400 + other.seconds) * 1_000_000 + other.microseconds
        return None

    def __eq__(self, other: object) -> bool:
        k = self._other(other)
        return k is not None and self.key == k

    def __hash__(self) -> int:  # equal to the timedelta it equals
        return hash(dt.timedelta(microseconds=self.key))

    def __lt__(self, other: object) -> bool:
        k = self._other(other)
        if k is None:
            return NotImplemented
        return self.key < k

    def __le__(self, other: object) -> bool:
        k = self._other(other)
        if k is None:
            return NotImplemented
        return self.key <= k

    def __gt__(self, other: object) -> bool:
        k = self._other(other)
        if k is None:
            return NotImplemented
        return self.key > k

    def __ge__(self, other: object) -> bool:
        k = self._other(other)
        if k is None:
            return NotImplemented
        return self.key >= k

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)

    def __str__(self) -> str:
        return text(self)


def fields(v: Interval | dt.timedelta) -> tuple[int, int, int]:
    """(months, days, micros) of either kind of interval; a timedelta's whole days (toward
    zero) and the rest with the same sign (``-02:00:00`` is 0 days and -2 hours, not Python's
    -1 days + 22 hours)."""
    if isinstance(v, Interval):
        return v.months, v.days, v.micros
    total = (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
    days = abs(total) // _US_PER_DAY * (1 if total >= 0 else -1)
    return 0, days, total - days * _US_PER_DAY


def interval_of(months: int, days: int, micros: int) -> Interval | dt.timedelta:
    """The engine's value for these fields: a timedelta when there are no months."""
    if months:
        return Interval(months, days, micros)
    return dt.timedelta(days=days, microseconds=micros)


# ------------------------------------------------------------------------------------- reading
#: Unit -> (months, days, microseconds) one of it is (PostgreSQL's deltatktbl spellings).
_UNITS: dict[str, tuple[int, int, int]] = {}
for _names, _value in (
    (("microsecond", "microseconds", "usec", "usecs", "us", "µs"), (0, 0, 1)),
    (("millisecond", "milliseconds", "msec", "msecs", "ms"), (0, 0, 1000)),
    (("second", "seconds", "sec", "secs", "s"), (0, 0, 1_000_000)),
    (("minute", "minutes", "min", "mins", "m"), (0, 0, 60_000_000)),
    (("hour", "hours", "hr", "hrs", "h"), (0, 0, 3_600_000_000)),
    (("day", "days", "d"), (0, 1, 0)),
    (("week", "weeks", "w"), (0, 7, 0)),
    (("month", "months", "mon", "mons"), (1, 0, 0)),
    (("year", "years", "yr", "yrs", "y"), (12, 0, 0)),
    (("decade", "decades"), (120, 0, 0)),
    (("century", "centuries"), (1200, 0, 0)),
    (("millennium", "millennia", "millenniums"), (12000, 0, 0)),
):
    for _n in _names:
        _UNITS[_n] = _value

_TOKEN = re.compile(
    r"\s*(?:(?P<clock>[+-]?\d+:\d{1,2}(?::\d{1,2}(?:\.\d+)?)?)"
    r"|(?P<n>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<u>[a-zµ]+))",
    re.I,
)
_ISO = re.compile(
    r"^(?P<sign>[+-])?P(?:(?P<Y>[\d.]+)Y)?(?:(?P<M>[\d.]+)M)?(?:(?P<W>[\d.]+)W)?(?:(?P<D>[\d.]+)D)?"
    r"(?:T(?:(?P<h>[\d.]+)H)?(?:(?P<mi>[\d.]+)M)?(?:(?P<s>[\d.]+)S)?)?$",
    re.I,
)


def parse_calendar(s: str) -> Interval | dt.timedelta | None:
    """Read ``s`` in PostgreSQL's forms (``'1 month'``, ``'1 year 2 mons 3 days 04:05:06'``,
    ``'2 months ago'``, ``'1 day -02:00:00'``, ISO 8601 ``'P1Y2M'``): its value, a timedelta
    when it names no months; None when it is not in these forms. Text naming months with a unit
    it does not know, or text left over, is 22007."""
    t = s.strip()
    iso = _ISO.match(t)
    if iso and t.upper().lstrip("+-") not in ("P", "PT"):
        return _from_iso(iso)
    low = t.lower()
    negate = low.endswith(" ago")
    if negate:
        t = t[: -len(" ago")].rstrip()
    pos, acc, seen_month = 0, [Decimal(0), Decimal(0), Decimal(0)], False
    while pos < len(t):
        m = _TOKEN.match(t, pos)
        if m is None:
            if t[pos:].strip():
                return None if not seen_month else _bad(s)
            break
        pos = m.end()
        if m.group("clock"):
            acc[2] += _clock_us(m.group("clock"))
            continue
        unit = m.group("u").lower()
        if unit not in _UNITS:
            return None if not seen_month else _bad(s)
        n = Decimal(m.group("n"))
        months, days, micros = _UNITS[unit]
        seen_month = seen_month or months != 0
        acc[0] += n * months
        acc[1] += n * days
        acc[2] += n * micros
    if pos == 0:
        return None
    months, days, micros = _spill(*acc)
    if negate:
        months, days, micros = -months, -days, -micros
    return interval_of(months, days, micros)


def _bad(s: str) -> Interval:
    raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{s}"')


def _clock_us(clock: str) -> Decimal:
    neg = clock.startswith("-")
    parts = clock.lstrip("+-").split(":")
    us = Decimal(int(parts[0]) * 3600 + int(parts[1]) * 60) * 1_000_000
    if len(parts) > 2:
        us += Decimal(parts[2]) * 1_000_000
    return -us if neg else us


def _spill(months: Decimal, days: Decimal, micros: Decimal) -> tuple[int, int, int]:
    """Whole months, days and microseconds: a fraction of a month spills into days (30 a
    month), a fraction of a day into microseconds, as PostgreSQL's reader does."""
    whole_months = int(months)
    days += (months - whole_months) * DAYS_PER_MONTH
    whole_days = int(days)
    micros += (days - whole_days) * _US_PER_DAY
    return whole_months, whole_days, int(micros.to_integral_value(ROUND_HALF_EVEN))


def _from_iso(m: re.Match[str]) -> Interval | dt.timedelta:
    def num(g: str) -> Decimal:
        return Decimal(m.group(g)) if m.group(g) else Decimal(0)

    months = num("Y") * 12 + num("M")
    days = num("W") * 7 + num("D")
    micros = (num("h") * 3600 + num("mi") * 60 + num("s")) * 1_000_000
    mo, d, us = _spill(months, days, micros)
    if m.group("sign") == "-":
        mo, d, us = -mo, -d, -us
    return interval_of(mo, d, us)


# ------------------------------------------------------------------------------------ printing
def text(v: Interval) -> str:
    """PostgreSQL's output (``IntervalStyle = postgres``): ``1 year 2 mons 3 days 04:05:06``;
    a field after a negative one carries its ``+``."""
    years, months = int(v.months / 12), v.months - 12 * int(v.months / 12)  # C's truncation
    parts: list[str] = []
    before_negative = False
    for value, unit in ((years, "year"), (months, "mon"), (v.days, "day")):
        if value == 0:
            continue
        plus = "+" if before_negative and value > 0 else ""
        parts.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
        before_negative = value < 0
    if v.micros or not parts:
        neg = v.micros < 0
        us = abs(v.micros)
        s, frac = divmod(us, 1_000_000)
        h, s = divmod(s, 3600)
        mi, s = divmod(s, 60)
        sign = "-" if neg else "+" if before_negative else ""
        clock = f"{sign}{h:02d}:{mi:02d}:{s:02d}" + (f".{frac:06d}".rstrip("0") if frac else "")
        parts.append(clock)
    return " ".join(parts)


# ---------------------------------------------------------------------------------- arithmetic
def add_months(d: dt.date, months: int) -> dt.date:
    """``d`` moved by whole calendar months, its day clamped to the month's last (Jan 31 + 1
    month is Feb 28 or 29), as PostgreSQL's ``timestamp + interval`` does."""
    if not months:
        return d
    y, m0 = divmod(d.month - 1 + months, 12)
    year = d.year + y
    if not dt.MINYEAR <= year <= dt.MAXYEAR:
        raise DatetimeFieldOverflow("timestamp out of range")
    month = m0 + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def add_interval(d: dt.date, v: Interval | dt.timedelta, sign: int) -> dt.datetime:
    """``d + v`` (``sign`` 1) or ``d - v`` (-1) as a timestamp: months first, then days and
    time, as PostgreSQL adds them."""
    months, days, micros = fields(v)
    at = d if isinstance(d, dt.datetime) else dt.datetime(d.year, d.month, d.day)
    try:
        moved = add_months(at, sign * months)
        assert isinstance(moved, dt.datetime)
        return moved + dt.timedelta(days=sign * days, microseconds=sign * micros)
    except OverflowError:
        raise DatetimeFieldOverflow("timestamp out of range") from None


def combine(a: Interval | dt.timedelta, b: Interval | dt.timedelta, sign: int) -> Any:
    """``a + b`` (``sign`` 1) or ``a - b`` (-1), field by field."""
    am, ad, au = fields(a)
    bm, bd, bu = fields(b)
    return interval_of(am + sign * bm, ad + sign * bd, au + sign * bu)


_MICRO = Decimal("0.000001")


def scale(v: Interval, factor: Decimal, *, divide: bool = False) -> Interval | dt.timedelta:
    """``v * factor`` (``v / factor`` when ``divide``): each field scaled, the fractions
    spilling down (a month's fraction into days, a day's into seconds), each remainder rounded
    to the microsecond on the way, as PostgreSQL's ``interval_mul`` and ``interval_div`` do."""

    def times(n: int) -> Decimal:
        return Decimal(n) / factor if divide else Decimal(n) * factor

    m, d = times(v.months), times(v.days)
    months, days = int(m), int(d)
    month_days = ((m - months) * DAYS_PER_MONTH).quantize(_MICRO, ROUND_HALF_EVEN)
    secs = ((d - days + month_days - int(month_days)) * 86_400).quantize(_MICRO, ROUND_HALF_EVEN)
    if abs(secs) >= 86_400:
        days += int(secs / 86_400)
        secs -= int(secs / 86_400) * 86_400
    days += int(month_days)
    micros = (times(v.micros) + secs * 1_000_000).to_integral_value(ROUND_HALF_EVEN)
    return interval_of(months, days, int(micros))
