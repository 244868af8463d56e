"""Dates, times, timestamps and intervals read from text, as the engine's types take them.

ISO 8601 dates, times and timestamps (an offset, ``Z`` or a time zone's name on a timestamp;
digits past the microsecond rounded; ``epoch``; a date from a timestamp's text); a well-formed one whose field is out of range (``2024-02-30``, ``24:00:01``) is
PostgreSQL's 22008, anything else a :class:`TextRejected`, which the type's coercion reports in
its system's words. Intervals: ISO 8601 durations (``PT24H``), CockroachDB's Go-style
(``1h30m``), PostgreSQL's (``1 day 02:00:00``) and, with months and years,
:mod:`changefeed.engine.intervals`.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from decimal import Decimal

from changefeed.engine.intervals import Interval, parse_calendar
from changefeed.exceptions import DatetimeFieldOverflow, InvalidArgument

__all__ = [
    "TextRejected",
    "field_out_of_range",
    "parse_interval",
    "parse_interval_value",
    "parse_timestamp",
    "read_date",
    "read_time",
    "read_timestamp",
]


class TextRejected(ValueError):
    """Text that is not a value of the type; ``reason`` is ours, safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_DATE_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_SHAPE = re.compile(r"^\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$")


def field_out_of_range(text: str) -> DatetimeFieldOverflow:
    """PostgreSQL's 22008 for a well-formed date or time whose field is out of range."""
    return DatetimeFieldOverflow(f'date/time field value out of range: "{text}"')


_TS_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$", re.I
)


#: A fraction of a second with digits past the microsecond: (up to them, the next digit, the rest).
_SUB_MICRO = re.compile(r"^(.*\.\d{6})(\d+)(.*)$")
#: A timestamp's text ending in a time zone's name (``2024-06-01 00:00 UTC``, ``.. Europe/Paris``).
_NAMED_ZONE = re.compile(r"^(?P<ts>.*\d)\s+(?P<zone>[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*)$")
#: PostgreSQL's special value for 1970-01-01 00:00:00 UTC.
_EPOCH_WORD = "epoch"


def _zone(name: str) -> dt.tzinfo | None:
    if name.upper() in ("UTC", "GMT", "Z", "ZULU", "UCT"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def parse_timestamp(s: str) -> dt.datetime:
    """An ISO 8601 timestamp, with an offset, ``Z`` or a time zone's name (IANA, ``UTC``) after
    it or none; ``epoch`` (PostgreSQL's)."""
    s = s.strip()
    if not _TS_RE.match(s):
        if s.lower() == _EPOCH_WORD:
            return dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        named = _NAMED_ZONE.match(s)
        if named is None:
            raise TextRejected("not an ISO 8601 timestamp")
        zone = _zone(named.group("zone"))
        if zone is None:  # PostgreSQL's 22023
            raise InvalidArgument(f'time zone "{named.group("zone").lower()}" not recognized')
        local = parse_timestamp(named.group("ts"))
        if local.tzinfo is not None:
            raise TextRejected("two time zones")
        return local.replace(tzinfo=zone)
    s2 = s.replace("z", "Z")
    if s2.endswith("Z"):
        s2 = s2[:-1] + "+00:00"
    extra = dt.timedelta()
    m = _SUB_MICRO.match(s2)  # past microseconds: rounded to them, as PostgreSQL and CockroachDB do
    if m:
        s2 = m.group(1) + m.group(3)
        if int(m.group(2)[0]) >= 5:
            extra = dt.timedelta(microseconds=1)
    m = re.match(r"^(.*[+-]\d{2})(\d{2})$", s2)  # +0000 -> +00:00
    if m and ":" not in s2[-5:]:
        s2 = m.group(1) + ":" + m.group(2)
    return dt.datetime.fromisoformat(s2) + extra


def read_date(text: str) -> dt.date:
    """An ISO date, or the date of an ISO timestamp's text (its time dropped, as PostgreSQL and
    CockroachDB read ``'2024-01-05 10:00'::date``), or ``epoch``; 22008 for a well-formed one
    out of range, else ValueError."""
    s = text.strip()
    try:
        return dt.date.fromisoformat(s)
    except ValueError:
        if _DATE_SHAPE.match(s):
            raise field_out_of_range(s) from None
        if s.lower() == _EPOCH_WORD or (len(s) > 10 and _TS_RE.match(s)):
            stamp = read_timestamp(s)
            return stamp.date()
        raise


def read_time(text: str) -> dt.time:
    """An ISO time of day; 22008 for a well-formed one out of range, else ValueError."""
    s = text.strip()
    try:
        return dt.time.fromisoformat(s)
    except ValueError:
        if _TIME_SHAPE.match(s):
            raise field_out_of_range(s) from None
        raise


def read_timestamp(text: str) -> dt.datetime:
    """:func:`parse_timestamp`, with 22008 for a well-formed timestamp out of range."""
    try:
        return parse_timestamp(text)
    except TextRejected:
        raise
    except ValueError:  # well formed (parse_timestamp checked), a field out of range
        raise field_out_of_range(text.strip()) from None


_ISO_DUR = re.compile(
    r"^(?P<sign>-)?P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.I,
)
_PG_DUR = re.compile(r"(?P<n>-?\d+(?:\.\d+)?)\s*(?P<u>[a-zµ]+)", re.I)
_UNITS_US = {
    "us": 1, "µs": 1, "microsecond": 1, "microseconds": 1,
    "ms": 1000, "millisecond": 1000, "milliseconds": 1000,
    "s": 1_000_000, "sec": 1_000_000, "secs": 1_000_000, "second": 1_000_000, "seconds": 1_000_000,
    "m": 60_000_000, "min": 60_000_000, "mins": 60_000_000, "minute": 60_000_000, "minutes": 60_000_000,
    "h": 3_600_000_000, "hr": 3_600_000_000, "hour": 3_600_000_000, "hours": 3_600_000_000,
    "d": 86_400_000_000, "day": 86_400_000_000, "days": 86_400_000_000,
    "w": 604_800_000_000, "week": 604_800_000_000, "weeks": 604_800_000_000,
}  # fmt: skip


def parse_interval(s: str) -> dt.timedelta:
    """ISO 8601 durations (``PT24H``, ``P1D``), Go/CockroachDB style (``10s``, ``1h30m``) and
    PostgreSQL style (``1 day 2 hours``), and ``HH:MM:SS``."""
    s = s.strip()
    m = _ISO_DUR.match(s)
    if m and s.upper() not in ("P", "PT", "-P"):
        us = 0
        for g, mult in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60)):
            if m.group(g):
                us += int(m.group(g)) * mult * 1_000_000
        if m.group("s"):
            us += int(Decimal(m.group("s")) * 1_000_000)
        return dt.timedelta(microseconds=-us if m.group("sign") else us)
    hms = re.match(r"^(-)?(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$", s)
    if hms:
        us = int(hms.group(2)) * 3_600_000_000 + int(hms.group(3)) * 60_000_000
        us += int(Decimal(hms.group(4)) * 1_000_000)
        return dt.timedelta(microseconds=-us if hms.group(1) else us)
    pos, us_total = 0, 0
    compact = s.replace(" ", "")
    if compact:
        for part in _PG_DUR.finditer(s):
            unit = part.group("u").lower()
            if unit not in _UNITS_US:
                raise TextRejected(f'interval: unknown unit "{unit}"')
            us_total += int(Decimal(part.group("n")) * _UNITS_US[unit])
            pos += len(part.group(0).replace(" ", ""))
        if pos == len(compact):
            return dt.timedelta(microseconds=us_total)
    raise TextRejected("interval: missing unit")


def parse_interval_value(s: str) -> dt.timedelta | Interval:
    """An interval's text as a value: :func:`parse_interval`'s forms, and PostgreSQL's with
    months and years (``'1 month'``, ``'1 year 2 mons 3 days 04:05:06'``: an
    :class:`~changefeed.engine.intervals.Interval`)."""
    cal = parse_calendar(s)
    if isinstance(cal, Interval):
        return cal
    try:
        return parse_interval(s)
    except TextRejected:
        if cal is not None:  # PostgreSQL's own output form, such as '1 day 02:00:00'
            return cal
        raise
