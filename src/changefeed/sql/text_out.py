"""Values as PostgreSQL's text output writes them (float8out, timestamptz_out, interval_out in
the default ``DateStyle``/``IntervalStyle``): for the wire's text format and for a cast to text."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from changefeed.engine.array_text import array_to_text
from changefeed.engine.intervals import Interval, text as calendar_text
from changefeed.engine.types import single_digits

__all__ = ["float4_text", "float_text", "interval_text", "time_text", "timestamp_text", "to_text"]


def time_text(v: dt.time) -> str:
    """A time of day as PostgreSQL's ``time_out`` writes it: the fraction without trailing
    zeros (``10:11:12.123``)."""
    text = v.isoformat()
    return text.rstrip("0") if "." in text and v.tzinfo is None else text


def float_text(v: float) -> str:
    """float8out: the shortest digits that read back as ``v``, in positional notation when the
    decimal exponent is from -4 to 14 (``1`` not ``1.0``), else ``1.5e+15``; ``NaN``,
    ``Infinity``."""
    special = _special(v)
    return special if special is not None else _pg_form(repr(v), 15)


def float4_text(v: float) -> str:
    """float4out: the shortest digits that read back as ``v`` in single precision, positional
    when the exponent is from -4 to 5 (``0.1``, ``123456``, ``1.234567e+06``)."""
    special = _special(v)
    if special is not None:
        return special
    digits = single_digits(v)
    return float_text(v) if digits is None else _pg_form(digits, 6)


def _special(v: float) -> str | None:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    return None


def _pg_form(shortest: str, limit: int) -> str:
    """The number ``shortest`` writes (its digits as they are) as PostgreSQL's ryu output:
    positional for decimal exponents from -4 to ``limit - 1``, else ``d.ddde+XX``."""
    sign, digits, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent += len(digits) - len(ds)
    adjusted = exponent + len(ds) - 1
    minus = "-" if sign else ""
    if ds == "0":
        return minus + "0"
    if -4 <= adjusted < limit:
        if exponent >= 0:
            return minus + ds + "0" * exponent
        point = len(ds) + exponent
        if point > 0:
            return f"{minus}{ds[:point]}.{ds[point:]}"
        return f"{minus}0.{'0' * -point}{ds}"
    mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{minus}{mantissa}e{'+' if adjusted >= 0 else '-'}{abs(adjusted):02d}"


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


def to_text(v: Any) -> str:
    """A value as SQL text (``||``, ``concat``, a cast to a string): booleans as ``true``/``false``
    (CockroachDB's spelling), bytes decoded."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, bytes):  # bytea's text, as PostgreSQL's and CockroachDB's casts write it
        return "\\x" + v.hex()
    if isinstance(v, dt.time):
        return time_text(v)
    if isinstance(v, list):  # an array: PostgreSQL's and CockroachDB's text form
        return array_to_text(v, _element_text)
    if isinstance(v, float):
        return float_text(v)
    if isinstance(v, Decimal):  # positional, as numeric_out writes it (never 3.3E-7), no -0
        return format(v.copy_abs() if v.is_zero() else v, "f")
    if isinstance(v, dt.datetime):
        return timestamp_text(v)
    if isinstance(v, dt.timedelta | Interval):
        return interval_text(v)
    return str(v)


def _element_text(v: Any) -> str:
    return ("t" if v else "f") if isinstance(v, bool) else to_text(v)
