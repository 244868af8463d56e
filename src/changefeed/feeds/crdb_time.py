"""CockroachDB's duration and timestamp values of changefeed options: Go durations
(``resolved``, ``min_checkpoint_frequency``...) and ``AS OF SYSTEM TIME`` timestamps (``cursor``,
``end_time``), parsed and printed with CockroachDB's (and Go's) error texts."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation

from changefeed.engine.clock import CommitTs
from changefeed.engine.temporal_text import parse_interval
from changefeed.exceptions import InvalidOption

NS_PER_S = 1_000_000_000


# ---------------------------------------------------------------------------- Go durations
_GO_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": NS_PER_S,
    "m": 60 * NS_PER_S,
    "h": 3600 * NS_PER_S,
}
_GO_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds, with Go's error texts."""
    orig = text
    quoted = '"' + orig.replace("\\", "\\\\").replace('"', '\\"') + '"'
    s = text
    neg = False
    if s[:1] in ("-", "+"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if s == "":
        raise InvalidOption(f"time: invalid duration {quoted}")
    total = Decimal(0)
    while s:
        m = _GO_PART.match(s)
        assert m is not None
        number, unit = m.group(1), m.group(2)
        if number in ("", "."):
            raise InvalidOption(f"time: invalid duration {quoted}")
        if unit == "":
            raise InvalidOption(f"time: missing unit in duration {quoted}")
        mult = _GO_UNITS_NS.get(unit)
        if mult is None:
            raise InvalidOption(f'time: unknown unit "{unit}" in duration {quoted}')
        total += Decimal(number) * mult
        s = s[m.end() :]
    ns = int(total)
    if ns > (1 << 63) - 1:
        raise InvalidOption(f"time: invalid duration {quoted}")
    return -ns if neg else ns


def format_go_duration(ns: int) -> str:
    """Go's ``Duration.String()``: ``10s``, ``1m30s``, ``500ms``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < NS_PER_S:
        for unit, mult in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= mult:
                return sign + _trim(Decimal(ns) / mult) + unit
    h, rest = divmod(ns, 3600 * NS_PER_S)
    m, rest = divmod(rest, 60 * NS_PER_S)
    out = sign
    if h:
        out += f"{h}h"
    if h or m:
        out += f"{m}m"
    return out + _trim(Decimal(rest) / NS_PER_S) + "s"


def _trim(d: Decimal) -> str:
    s = format(d, "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


# ---------------------------------------------------------------------------- timestamps
_HLC_DECIMAL = re.compile(r"^-?[0-9]+(\.[0-9]*)?$")


def parse_crdb_timestamp(text: str, statement_time: CommitTs | None) -> CommitTs:
    """A timestamp as CockroachDB's ``AS OF SYSTEM TIME`` reads it (cursor, end_time).

    Accepted: ``<wall ns>.<logical>`` (``1536242855577149065.0000000000``), nanoseconds
    (``1655402400000000000``), a timestamp (``2026-11-22 20:00:00``, ``2026-11-22T20:00:00Z``,
    with a zone or UTC), or a negative interval relative to ``statement_time`` (``'-3 days'``).
    """
    s = text.strip()
    if _HLC_DECIMAL.match(s):
        return _decimal_to_hlc(s)
    try:
        iv = parse_interval(s)
    except ValueError:
        iv = None
    if iv is not None:
        if iv == dt.timedelta(0):
            raise InvalidOption(f"interval value '{text}' too small, absolute value must be >= 1µs")
        if statement_time is None:
            raise InvalidOption(f"timestamp '{text}' is relative and needs the statement time")
        return CommitTs(statement_time.wall + _td_ns(iv), 0)
    ts = _parse_timestamp_ns(s)
    if ts is not None:
        return CommitTs(ts, 0)
    raise InvalidOption("AS OF SYSTEM TIME: value is neither timestamp, decimal, nor interval")


def _td_ns(td: dt.timedelta) -> int:
    return (td.days * 86_400 + td.seconds) * NS_PER_S + td.microseconds * 1_000


def _decimal_to_hlc(s: str) -> CommitTs:
    """CockroachDB's ``hlc.DecimalToHLC``: integer part wall ns, 10 fractional digits logical."""
    try:
        d = Decimal(s)
    except InvalidOperation:
        raise InvalidOption(f'could not parse "{s}" as a timestamp') from None
    if d < 0:
        raise InvalidOption(f"timestamp {s} must be non-negative")
    wall = int(d)
    frac = (d - wall) * 10**10
    if frac != int(frac):
        raise InvalidOption(
            f"logical part of {s} has too many digits: the logical counter is 10 decimal digits"
        )
    logical = int(frac)
    if logical > 0x7FFFFFFF:
        raise InvalidOption(f"logical part of {s} is out of range")
    return CommitTs(wall, logical)


_TS = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})(?:[T ](?P<time>\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<frac>\d{1,9}))?)?"
    r"\s*(?P<zone>Z|z|UTC|[+-]\d{2}(?::?\d{2})?)?$"
)


def _parse_timestamp_ns(s: str) -> int | None:
    m = _TS.match(s)
    if not m:
        return None
    try:
        base = dt.datetime.fromisoformat(f"{m.group('date')}T{m.group('time') or '00:00:00'}")
    except ValueError:
        return None
    zone = m.group("zone")
    offset = dt.timedelta(0)
    if zone and zone not in ("Z", "z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or "0"))
    utc = base.replace(tzinfo=dt.UTC) - offset
    frac = (m.group("frac") or "").ljust(9, "0")
    return int(utc.timestamp()) * NS_PER_S + int(frac or "0")


__all__ = ["NS_PER_S", "format_go_duration", "parse_crdb_timestamp", "parse_go_duration"]
