"""PostgreSQL's ``to_date(text, template)`` and ``to_timestamp(text, template)`` /
``to_timestamp(epoch seconds)``, beside Apache Phoenix's ``TO_DATE``/``TO_TIMESTAMP`` (Java date
patterns, one argument: ``sql.phoenix_functions``), which the same names call when the call is
Phoenix's (:func:`is_postgres_call`).

A template is read as PostgreSQL reads it: ``YYYY``, ``YY``, ``MM``, ``DD``, ``DDD``, ``HH24``,
``HH12``/``HH``, ``MI``, ``SS``, ``MS``, ``US``, ``AM``/``PM``, ``Mon``/``Month`` (any case),
``FM`` (no padding: accepted), double-quoted text, and any other character standing for itself or
for any separator; numbers may have fewer digits than the field. A value that does not fit is
22007, a field out of range 22008.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from decimal import Decimal
from typing import Any

from changefeed.exceptions import DatetimeFieldOverflow, InvalidDatetimeFormat
from changefeed.sql.function_errors import unknown_signature

__all__ = ["is_postgres_call", "pg_to_date", "pg_to_timestamp"]

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december"]  # fmt: skip
#: Template fields, longest first, and the pattern each reads.
_FIELDS = [
    ("YYYY", r"(?P<YYYY>\d{1,4})"),
    ("HH24", r"(?P<HH24>\d{1,2})"),
    ("HH12", r"(?P<HH12>\d{1,2})"),
    ("MONTH", r"(?P<MONTH>[A-Za-z]+)"),
    ("MON", r"(?P<MON>[A-Za-z]{3})"),
    ("DDD", r"(?P<DDD>\d{1,3})"),
    ("YY", r"(?P<YY>\d{1,2})"),
    ("MM", r"(?P<MM>\d{1,2})"),
    ("DD", r"(?P<DD>\d{1,2})"),
    ("HH", r"(?P<HH12>\d{1,2})"),
    ("MI", r"(?P<MI>\d{1,2})"),
    ("SS", r"(?P<SS>\d{1,2})"),
    ("MS", r"(?P<MS>\d{1,3})"),
    ("US", r"(?P<US>\d{1,6})"),
    ("AM", r"(?P<AMPM>[AaPp]\.?[Mm]\.?)"),
    ("PM", r"(?P<AMPM>[AaPp]\.?[Mm]\.?)"),
]
_PG_TEMPLATE = re.compile(r"YYYY|HH24|MI|DD|Mon|MON|Month")


def is_postgres_call(args: tuple[Any, ...], phoenix: bool) -> bool:
    """Whether ``to_date``/``to_timestamp(args)`` is PostgreSQL's: never in a Phoenix query; a
    number (epoch seconds), or a text and a template written PostgreSQL's way (``YYYY-MM-DD``,
    not Java's ``yyyy-MM-dd``)."""
    if phoenix:
        return False
    if len(args) == 1:
        return isinstance(args[0], int | float | Decimal) and not isinstance(args[0], bool)
    return len(args) == 2 and isinstance(args[1], str) and bool(_PG_TEMPLATE.search(args[1]))


@functools.lru_cache(maxsize=256)
def _pattern(template: str) -> re.Pattern[str]:
    """The regular expression a template reads (built once per template: ``to_date`` runs per row)."""
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(template):
        if template.startswith(("FM", "fm"), i):
            i += 2
            continue
        if template[i] == '"':
            end = template.find('"', i + 1)
            end = len(template) if end < 0 else end
            out.append(re.escape(template[i + 1 : end]))
            i = end + 1
            continue
        for field, pat in _FIELDS:
            if template[i : i + len(field)].upper() == field:
                name = re.search(r"\?P<(\w+)>", pat)
                assert name is not None
                if name.group(1) in seen:  # a field twice: the second only matches
                    pat = pat.replace(f"?P<{name.group(1)}>", "?:")
                seen.add(name.group(1))
                out.append(pat)
                i += len(field)
                break
        else:
            ch = template[i]
            out.append(r"\s*" if ch.isspace() else r"[^\w]?" if not ch.isalnum() else re.escape(ch))
            i += 1
    return re.compile(r"\s*" + "".join(out) + r"\s*$")


def _fields(text: str, template: str) -> dict[str, str]:
    m = _pattern(template).match(text)
    if m is None:
        raise InvalidDatetimeFormat(f'invalid value "{text}" for "{template}"')
    return {k: v for k, v in m.groupdict().items() if v is not None}


def _build(text: str, template: str) -> dt.datetime:
    f = _fields(text, template)
    year = (
        int(f["YYYY"])
        if "YYYY" in f
        else (2000 + int(f["YY"]) if int(f["YY"]) < 70 else 1900 + int(f["YY"]))
        if "YY" in f
        else 1
    )
    month = int(f.get("MM", 1))
    for key in ("MONTH", "MON"):
        if key in f:
            name = f[key].lower()
            found = [
                i for i, m in enumerate(_MONTHS, 1) if m.startswith(name) and (key == "MON" or m == name)
            ]
            if not found:
                raise InvalidDatetimeFormat(f'invalid value "{f[key]}" for "{key}"')
            month = found[0]
    day = int(f.get("DD", 1))
    hour = int(f.get("HH24", f.get("HH12", 0)))
    if "AMPM" in f and "HH24" not in f:
        pm = f["AMPM"][0].lower() == "p"
        hour = hour % 12 + (12 if pm else 0)
    minute, second = int(f.get("MI", 0)), int(f.get("SS", 0))
    micros = (
        int(f["US"].ljust(6, "0")) if "US" in f else int(f["MS"].ljust(3, "0")) * 1000 if "MS" in f else 0
    )
    try:
        if "DDD" in f:
            base = dt.datetime(year, 1, 1) + dt.timedelta(days=int(f["DDD"]) - 1)
            return base.replace(hour=hour, minute=minute, second=second, microsecond=micros)
        return dt.datetime(year, month, day, hour, minute, second, micros)
    except ValueError:
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{text}"') from None


def pg_to_date(*args: Any) -> dt.date | None:
    """``to_date(text, template)``."""
    if len(args) != 2:
        raise unknown_signature("to_date", args)
    if any(a is None for a in args):
        return None
    if not all(isinstance(a, str) for a in args):
        raise unknown_signature("to_date", args)
    return _build(args[0], args[1]).date()


def pg_to_timestamp(*args: Any) -> dt.datetime | None:
    """``to_timestamp(text, template)`` (a timestamptz in UTC) or ``to_timestamp(seconds)``."""
    if any(a is None for a in args):
        return None
    if len(args) == 1 and isinstance(args[0], int | float | Decimal) and not isinstance(args[0], bool):
        seconds = Decimal(repr(args[0])) if isinstance(args[0], float) else Decimal(args[0])
        micros = int((seconds * 1_000_000).to_integral_value())
        try:
            return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)
        except OverflowError:
            raise DatetimeFieldOverflow("timestamp out of range") from None
    if len(args) != 2 or not all(isinstance(a, str) for a in args):
        raise unknown_signature("to_timestamp", args)
    return _build(args[0], args[1]).replace(tzinfo=dt.UTC)
