"""Values as PostgreSQL's text output writes them (float8out, timestamptz_out, interval_out in
the default ``DateStyle``/``IntervalStyle``): for the wire's text format and for a cast to text."""

from __future__ import annotations

import datetime as dt

from changefeed.engine.intervals import Interval, text as calendar_text

__all__ = ["float_text", "interval_text", "timestamp_text"]


def float_text(v: float) -> str:
    """Shortest round-trip digits, ``1`` not ``1.0``, ``NaN``, ``Infinity``."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    s = repr(v)
    return s[:-2] if s.endswith(".0") else s


def timestamp_text(v: dt.datetime) -> str:
    """``2024-01-01 12:34:56.789`` (fraction without trailing zeros), zoned with ``+00``."""
    body = v.replace(tzinfo=None, microsecond=0).isoformat(sep=" ")
    if v.microsecond:
        body += f".{v.microsecond:06d}".rstrip("0")
    if v.tzinfo is None:
        return body
    off = v.utcoffset() or dt.timedelta(0)
    sign = "-" if off < dt.timedelta(0) else "+"
    secs = abs(int(off.total_seconds()))
    h, m = divmod(secs // 60, 60)
    return f"{body}{sign}{h:02d}" + (f":{m:02d}" if m else "")


def interval_text(v: dt.timedelta | Interval) -> str:
    """``1 day 02:00:00``, ``-01:00:00``, ``1 year 2 mons`` (IntervalStyle postgres)."""
    if isinstance(v, Interval):
        return calendar_text(v)
    days, secs, us = v.days, v.seconds, v.microseconds
    neg = days < 0
    if neg:  # PostgreSQL prints -1 days +23:00:00 as "-01:00:00"
        total = -(days * 86_400_000_000 + secs * 1_000_000 + us)
        d, rest = divmod(total, 86_400_000_000)
        parts = [f"-{d} days"] if d else []
        clock = _clock(rest)
        return " ".join([*parts, f"-{clock}" if rest else ""]).strip() or "00:00:00"
    parts = [f"{days} day" + ("s" if days != 1 else "")] if days else []
    rest = secs * 1_000_000 + us
    if rest or not parts:
        parts.append(_clock(rest))
    return " ".join(parts)


def _clock(us: int) -> str:
    s, frac = divmod(us, 1_000_000)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    out = f"{h:02d}:{m:02d}:{s:02d}"
    return out + (f".{frac:06d}".rstrip("0") if frac else "")
