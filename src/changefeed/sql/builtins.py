"""Scalar functions of PostgreSQL and CockroachDB that clients and reports call: strings, numbers,
dates. Each takes evaluated arguments; a NULL argument gives NULL unless the function says
otherwise (``concat_ws``, ``greatest``, ``least``, ``nullif``); a wrong number or kind of
argument is CockroachDB's ``unknown signature: f(..)`` (``42883``)."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import math
import random
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Any, cast

from changefeed.engine.intervals import Interval
from changefeed.exceptions import InvalidStatement, UnsupportedFeature
from changefeed.sql.arithmetic import INT64_MAX, INT64_MIN, int_quotient, remainder
from changefeed.sql.array_functions import ARRAY_FUNCTIONS
from changefeed.sql.builtins_more import MORE, log_base
from changefeed.sql.function_errors import invalid_argument, unknown_signature
from changefeed.sql.interval_functions import INTERVAL_FUNCTIONS, extract_interval
from changefeed.sql.numeric import (
    EXACT,
    NUMERIC_FUNCTIONS,
    numeric_div,
    numeric_exp,
    numeric_ln,
    numeric_log,
    numeric_sqrt,
)
from changefeed.sql.regex_functions import REGEX_FUNCTIONS
from changefeed.sql.text_functions import TEXT_FUNCTIONS
from changefeed.sql.text_out import to_text

__all__ = ["BUILTINS", "DATE_FIELDS"]

Number = int | float | Decimal


def _strict(name: str, *kinds: Any, optional: int = 0) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Check arity and argument kinds (``kinds[i]``: a type or tuple of types), NULL in gives
    NULL out; the last ``optional`` arguments may be left out."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any) -> Any:
            if not len(kinds) - optional <= len(args) <= len(kinds):
                raise unknown_signature(name, args)
            if any(a is None for a in args):
                return None
            for a, k in zip(args, kinds, strict=False):
                if not isinstance(a, k) or isinstance(a, bool):  # no kind here is bool
                    raise unknown_signature(name, args)
            return fn(*args)

        return checked

    return wrap


_NUM = (int, float, Decimal)
_INT = int
_STR = str

# ------------------------------------------------------------------------------------- strings


def _substr(s: str, start: int, length: int | None = None) -> str:
    """PostgreSQL's: 1-based; a start before 1 still counts the characters before it."""
    if length is not None and length < 0:
        raise invalid_argument("negative substring length not allowed", "22011")
    begin = start - 1
    end = None if length is None else begin + length
    begin = max(begin, 0)
    if end is not None and end <= begin:
        return ""
    return s[begin:end]


def _trim(left: bool, right: bool) -> Callable[..., str]:
    def trim(s: str, what: str | None = None) -> str:
        cut = " " if what is None else what
        if left and right:
            return s.strip(cut)
        return s.lstrip(cut) if left else s.rstrip(cut)

    return trim


def _split_part(s: str, delim: str, n: int) -> str:
    if n == 0:
        raise invalid_argument("field position must not be zero", "22023")
    parts = s.split(delim) if delim else [s]
    if n < 0:
        n = len(parts) + n + 1
        if n <= 0:
            return ""
    return parts[n - 1] if n <= len(parts) else ""


def _left(s: str, n: int) -> str:
    return s[:n] if n >= 0 else s[: max(len(s) + n, 0)]


def _right(s: str, n: int) -> str:
    return (s[-n:] if n else "") if n >= 0 else s[min(-n, len(s)) :]


def _pad(left: bool) -> Callable[..., str]:
    def pad(s: str, n: int, fill: str = " ") -> str:
        if n <= len(s) or not fill:
            return s[: max(n, 0)]
        room = n - len(s)
        filler = (fill * (room // len(fill) + 1))[:room]
        return filler + s if left else s + filler

    return pad


def _initcap(s: str) -> str:
    out, start = [], True
    for ch in s:
        out.append(ch.upper() if start else ch.lower())
        start = not ch.isalnum()
    return "".join(out)


def _concat_ws(sep: Any, *xs: Any) -> str | None:
    if sep is None:
        return None
    return to_text(sep).join(to_text(x) for x in xs if x is not None)


# ------------------------------------------------------------------------------------- numbers


def _round(x: Number, places: int | None = None) -> Number:
    """Half away from zero for exact numbers (PostgreSQL's numeric), to even for floats. An
    integer is PostgreSQL's: ``round(i)`` a double, ``round(i, n)`` a numeric."""
    if isinstance(x, int) and places is None:
        return float(x)
    if isinstance(x, float):
        return float(round(x, places or 0))
    q = Decimal(1).scaleb(-(places or 0))
    return Decimal(x).quantize(q, rounding=decimal.ROUND_HALF_UP, context=EXACT)


def _trunc(x: Number, places: int | None = None) -> Number:
    """Toward zero; of an integer a double (``trunc(i)``) or a numeric (``trunc(i, n)``), as
    PostgreSQL's."""
    if isinstance(x, int) and places is None:
        return float(x)
    if isinstance(x, float):
        f = 10.0 ** (places or 0)
        return math.trunc(x * f) / f
    return Decimal(x).quantize(Decimal(1).scaleb(-(places or 0)), rounding=decimal.ROUND_DOWN, context=EXACT)


def _ceil(x: Number) -> Number:
    """Of an integer a double, as PostgreSQL's ``ceil(double precision)`` takes it."""
    if isinstance(x, float | int):
        return float(math.ceil(x))
    return Decimal(math.ceil(x))


def _floor(x: Number) -> Number:
    if isinstance(x, float | int):
        return float(math.floor(x))
    return Decimal(math.floor(x))


def _mod(a: Number, b: Number) -> Number:
    """The remainder with the sign of ``a``, as PostgreSQL's ``mod`` and ``%``."""
    if b == 0:
        raise invalid_argument("division by zero", "22012")
    return cast(Number, remainder(a, b))


def _div(a: Number, b: Number) -> Number:
    if b == 0:
        raise invalid_argument("division by zero", "22012")
    if isinstance(a, int) and isinstance(b, int):
        return int_quotient(a, b)
    if isinstance(a, float) or isinstance(b, float):
        return float(math.trunc(float(a) / float(b)))
    return Decimal(math.trunc(Decimal(a) / Decimal(b)))


def _numeric_wide(x: Number) -> Number:
    """An integer past INT8 is a numeric, as PostgreSQL types such a literal."""
    return Decimal(x) if type(x) is int and not INT64_MIN <= x <= INT64_MAX else x


def _sqrt(x: Number) -> Number:
    x = _numeric_wide(x)
    if x < 0:
        raise invalid_argument("cannot take square root of a negative number", "2201F")
    return numeric_sqrt(x) if isinstance(x, Decimal) else math.sqrt(x)


def _log_domain(x: Number) -> None:
    if x <= 0:
        word = "zero" if x == 0 else "a negative number"
        raise invalid_argument(f"cannot take logarithm of {word}", "2201E")


def _ln(x: Number) -> Number:
    x = _numeric_wide(x)
    _log_domain(x)
    return numeric_ln(x) if isinstance(x, Decimal) else math.log(x)


def _log10(x: Number) -> Number:
    x = _numeric_wide(x)
    _log_domain(x)
    return numeric_log(Decimal(10), x) if isinstance(x, Decimal) else math.log10(x)


def _integral(x: Number) -> bool:
    if isinstance(x, float):
        return x.is_integer()
    return isinstance(x, int) or x == x.to_integral_value()


def _power(a: Number, b: Number) -> Number:
    if a == 0 and b < 0:
        raise invalid_argument("zero raised to a negative power is undefined", "2201F")
    if a < 0 and not _integral(b):
        raise invalid_argument(
            "a negative number raised to a non-integer power yields a complex result", "2201F"
        )
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        return int(a**b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return _numeric_power(Decimal(a), Decimal(b))
    return float(float(a) ** float(b))


def _numeric_power(a: Decimal, b: Decimal) -> Decimal:
    """``numeric ^ numeric`` at PostgreSQL's scale (``power_var``): 16 significant digits for a
    result of about one, fewer after the point as the result grows, at least the operands'."""
    with localcontext(Context(prec=200)):
        out = a**b
    if not out.is_finite():
        return out
    weight = int(float(b) * math.log10(abs(float(a)))) if a != 0 else 0
    scales = [-x for x in (a.as_tuple().exponent, b.as_tuple().exponent) if isinstance(x, int)]
    rscale = min(max(16 - weight, *scales, 0), 1000)
    return out.quantize(Decimal(1).scaleb(-rscale), rounding=ROUND_HALF_UP)


def _sign(x: Number) -> Number:
    """-1, 0 or 1: a numeric of a numeric, else a double (PostgreSQL's of an integer too)."""
    s = (x > 0) - (x < 0)
    return Decimal(s) if isinstance(x, Decimal) else float(s)


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[..., Any]:
    """``greatest``/``least``: of the arguments that are not NULL."""

    def fn(*xs: Any) -> Any:
        vals = [x for x in xs if x is not None]
        try:
            return pick(vals) if vals else None
        except TypeError:
            raise unknown_signature(name, xs) from None

    return fn


def _chr(n: int) -> str:
    if not 0 < n <= 0x10FFFF:
        raise invalid_argument(f"requested character too large for encoding: {n}", "54000")
    return chr(n)


def _nullif(a: Any, b: Any) -> Any:
    return None if a is not None and b is not None and a == b else a


# ---------------------------------------------------------------------------------------- dates

#: ``extract``/``date_part`` fields and what each reads of a date or timestamp: numbers as
#: PostgreSQL 14+'s ``extract`` gives them (numerics; seconds and the epoch of a timestamp with
#: six digits after the point, milliseconds with three).
DATE_FIELDS: dict[str, Callable[[Any], Number]] = {
    "millennium": lambda t: (t.year + 999) // 1000,
    "century": lambda t: (t.year + 99) // 100,
    "decade": lambda t: t.year // 10,
    "year": lambda t: t.year,
    "isoyear": lambda t: t.isocalendar()[0],
    "quarter": lambda t: (t.month - 1) // 3 + 1,
    "month": lambda t: t.month,
    "week": lambda t: t.isocalendar()[1],
    "day": lambda t: t.day,
    "dow": lambda t: t.isoweekday() % 7,
    "isodow": lambda t: t.isoweekday(),
    "doy": lambda t: t.timetuple().tm_yday,
    "julian": lambda t: _julian(t),
    "hour": lambda t: t.hour,
    "minute": lambda t: t.minute,
    "second": lambda t: Decimal(t.second * 1_000_000 + t.microsecond).scaleb(-6),
    "millisecond": lambda t: Decimal(t.second * 1_000_000 + t.microsecond).scaleb(-3),
    "microsecond": lambda t: t.second * 1_000_000 + t.microsecond,
    "epoch": lambda t: _epoch(t),
}
#: Fields of a time of day, which a date does not have (PostgreSQL: 0A000).
_TIME_FIELDS = frozenset({"hour", "minute", "second", "millisecond", "microsecond"})
#: The Julian day of 0001-01-01 minus one: ``date.toordinal()`` plus this is the Julian day.
_JULIAN_OFFSET = 1_721_425
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US_PER_DAY = 86_400_000_000


def _as_datetime(t: Any) -> dt.datetime:
    if isinstance(t, dt.datetime):
        return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)
    return dt.datetime(t.year, t.month, t.day, tzinfo=dt.UTC)


def _epoch(t: Any) -> Decimal:
    """Seconds since 1970-01-01 UTC: of a date whole, of a timestamp to the microsecond."""
    micros = (_as_datetime(t) - _EPOCH) // dt.timedelta(microseconds=1)
    return Decimal(micros).scaleb(-6) if isinstance(t, dt.datetime) else Decimal(micros // 1_000_000)


def _julian(t: Any) -> Decimal:
    """The Julian day: of a date whole, of a timestamp with the day's fraction at the scale
    PostgreSQL's numeric division picks."""
    day = Decimal(t.toordinal() + _JULIAN_OFFSET)
    if not isinstance(t, dt.datetime):
        return day
    micros = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
    return EXACT.add(day, numeric_div(Decimal(micros), Decimal(_US_PER_DAY)))


def _extract(field: str, t: Any) -> Number:
    """``extract(field FROM t)``: a numeric, as PostgreSQL 14+'s."""
    if isinstance(t, dt.timedelta | Interval):
        return extract_interval(field, t)  # type: ignore[no-any-return]
    name = field.lower()
    fn = DATE_FIELDS.get(name)
    if fn is None:
        raise InvalidStatement(f'unsupported timestamp unit "{field}"')
    if not isinstance(t, dt.date | dt.datetime):
        raise unknown_signature("extract", (field, t))
    if not isinstance(t, dt.datetime) and name in _TIME_FIELDS:
        raise UnsupportedFeature(f'unit "{name}" not supported for type date')
    out = fn(t)
    return Decimal(out) if isinstance(out, int) else out


def _date_part(field: str, t: Any) -> Number:
    """``date_part(field, t)``: ``extract``'s value as double precision, as PostgreSQL's (a
    date is read as its midnight: ``date_part('hour', d)`` is 0)."""
    if isinstance(t, dt.date) and not isinstance(t, dt.datetime):
        t = dt.datetime(t.year, t.month, t.day)
    return float(_extract(field, t))


_TRUNC_UNITS = (
    "microsecond",
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
)


def _date_trunc(unit: str, t: Any) -> Any:
    u = unit.lower()
    if u not in _TRUNC_UNITS:
        raise InvalidStatement(f'unsupported timestamp unit "{unit}"')
    if isinstance(t, dt.datetime):
        ts = t
    elif isinstance(t, dt.date):
        ts = dt.datetime(t.year, t.month, t.day, tzinfo=dt.UTC)  # a date truncates as a timestamptz
    else:
        raise unknown_signature("date_trunc", (unit, t))
    if u == "microsecond":
        return ts
    if u == "millisecond":
        return ts.replace(microsecond=ts.microsecond // 1000 * 1000)
    ts = ts.replace(microsecond=0)
    if u == "second":
        return ts
    if u == "minute":
        return ts.replace(second=0)
    if u == "hour":
        return ts.replace(minute=0, second=0)
    ts = ts.replace(hour=0, minute=0, second=0)
    if u == "day":
        return ts
    if u == "week":
        return ts - dt.timedelta(days=ts.weekday())
    if u == "month":
        return ts.replace(day=1)
    if u == "quarter":
        return ts.replace(month=(ts.month - 1) // 3 * 3 + 1, day=1)
    return ts.replace(month=1, day=1)


def _array_length(arr: Any, dim: int) -> int | None:
    if not isinstance(arr, list | tuple):
        raise unknown_signature("array_length", (arr, dim))
    return len(arr) if dim == 1 and arr else None


#: The functions by lower-case name.
BUILTINS: dict[str, Callable[..., Any]] = {
    "substr": _strict("substr", _STR, _INT, _INT, optional=1)(_substr),
    "substring": _strict("substring", _STR, _INT, _INT, optional=1)(_substr),
    "strpos": _strict("strpos", _STR, _STR)(lambda s, sub: s.find(sub) + 1),
    "position": _strict("position", _STR, _STR)(lambda s, sub: s.find(sub) + 1),
    "btrim": _strict("btrim", _STR, _STR, optional=1)(_trim(True, True)),
    "trim": _strict("trim", _STR, _STR, optional=1)(_trim(True, True)),
    "ltrim": _strict("ltrim", _STR, _STR, optional=1)(_trim(True, False)),
    "rtrim": _strict("rtrim", _STR, _STR, optional=1)(_trim(False, True)),
    "split_part": _strict("split_part", _STR, _STR, _INT)(_split_part),
    "concat_ws": _concat_ws,
    "replace": _strict("replace", _STR, _STR, _STR)(lambda s, a, b: s.replace(a, b) if a else s),
    "left": _strict("left", _STR, _INT)(_left),
    "right": _strict("right", _STR, _INT)(_right),
    "lpad": _strict("lpad", _STR, _INT, _STR, optional=1)(_pad(True)),
    "rpad": _strict("rpad", _STR, _INT, _STR, optional=1)(_pad(False)),
    "repeat": _strict("repeat", _STR, _INT)(lambda s, n: s * max(n, 0)),
    "reverse": _strict("reverse", _STR)(lambda s: s[::-1]),
    "initcap": _strict("initcap", _STR)(_initcap),
    "starts_with": _strict("starts_with", _STR, _STR)(lambda s, p: s.startswith(p)),
    "char_length": _strict("char_length", _STR)(len),
    "character_length": _strict("character_length", _STR)(len),
    "octet_length": _strict("octet_length", (str, bytes))(
        lambda s: len(s.encode() if isinstance(s, str) else s)
    ),
    "md5": _strict("md5", (str, bytes))(
        lambda s: hashlib.md5(s.encode() if isinstance(s, str) else s).hexdigest()
    ),
    "sha256": _strict("sha256", (str, bytes))(
        lambda s: hashlib.sha256(s.encode() if isinstance(s, str) else s).hexdigest()
    ),
    "to_hex": _strict("to_hex", _INT)(lambda n: format(n & 0xFFFFFFFFFFFFFFFF if n < 0 else n, "x")),
    "ascii": _strict("ascii", _STR)(lambda s: ord(s[0]) if s else 0),
    "chr": _strict("chr", _INT)(_chr),
    "round": _strict("round", _NUM, _INT, optional=1)(_round),
    "trunc": _strict("trunc", _NUM, _INT, optional=1)(_trunc),
    "ceil": _strict("ceil", _NUM)(_ceil),
    "ceiling": _strict("ceiling", _NUM)(_ceil),
    "floor": _strict("floor", _NUM)(_floor),
    "mod": _strict("mod", _NUM, _NUM)(_mod),
    "div": _strict("div", _NUM, _NUM)(_div),
    "sqrt": _strict("sqrt", _NUM)(_sqrt),
    "cbrt": _strict("cbrt", _NUM)(lambda x: math.cbrt(float(x))),
    "ln": _strict("ln", _NUM)(_ln),
    "log": lambda *a: log_base(*a) if len(a) == 2 else _strict("log", _NUM)(_log10)(*a),
    "exp": _strict("exp", _NUM)(lambda x: numeric_exp(x) if isinstance(x, Decimal) else math.exp(x)),
    "power": _strict("power", _NUM, _NUM)(_power),
    "pow": _strict("pow", _NUM, _NUM)(_power),
    "sign": _strict("sign", _NUM)(_sign),
    "pi": _strict("pi")(lambda: math.pi),
    "random": _strict("random")(random.random),
    "greatest": _extreme("greatest", max),
    "least": _extreme("least", min),
    "nullif": _nullif,
    "extract": _strict("extract", _STR, (dt.date, dt.timedelta, Interval))(_extract),
    "date_part": _strict("date_part", _STR, (dt.date, dt.timedelta, Interval))(_date_part),
    "date_trunc": _strict("date_trunc", _STR, dt.date)(_date_trunc),
    "array_length": _strict("array_length", (list, tuple), _INT)(_array_length),
}
BUILTINS.update(MORE)
BUILTINS.update(INTERVAL_FUNCTIONS)
BUILTINS.update(ARRAY_FUNCTIONS)
BUILTINS.update(REGEX_FUNCTIONS)
BUILTINS.update(TEXT_FUNCTIONS)
BUILTINS.update(NUMERIC_FUNCTIONS)
