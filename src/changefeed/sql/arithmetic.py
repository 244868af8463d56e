"""``+ - * / %`` over Python values: numbers, and dates, timestamps and intervals as CockroachDB
(PostgreSQL) and Apache Phoenix define their arithmetic.

CockroachDB: ``date ± int`` is a date (days), ``date - date`` an int (days), ``date|timestamp ±
interval`` a timestamp, ``timestamp - timestamp`` an interval, intervals add and scale.

Apache Phoenix (``phoenix=True``: CDC queries): a DATE or TIMESTAMP ``± number`` moves it by that
many days, fractions included (``CURRENT_DATE() - 1.5`` is 36 hours ago, to the millisecond);
``DATE - DATE`` is the number of days between them as a DECIMAL.

Anything else is CockroachDB's ``unsupported binary operator: <date> * <int>`` (SQLSTATE 42883).

A DECIMAL quotient in SQL is PostgreSQL's numeric division (``numeric.numeric_div``: the scale
``select_div_scale`` picks, rounded half away from zero), so ``1.0 / 3`` is
``0.33333333333333333333`` and ``7.0 / 2`` ``3.5000000000000000``, digit for digit. Phoenix divides to 38 significant digits, half up (its
``BigDecimal`` math context); CQL keeps 28.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from changefeed.engine.intervals import Interval, add_interval, combine, scale
from changefeed.engine.type_errors import value_type
from changefeed.exceptions import DivisionByZero, NumericValueOutOfRange, UndefinedFunction
from changefeed.sql.numeric import EXACT, numeric_div

_MS_PER_DAY = Decimal(86_400_000)
_DAY = dt.timedelta(days=1)


def _number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _dec(v: Any) -> Any:
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v) if isinstance(v, int) else v


def unsupported(op: str, a: Any, b: Any) -> UndefinedFunction:
    return UndefinedFunction(f"unsupported binary operator: <{value_type(a)}> {op} <{value_type(b)}>")


def arithmetic(op: str, a: Any, b: Any, *, phoenix: bool = False, dialect: str = "sql") -> Any:
    """``a op b`` for non-NULL ``a`` and ``b``."""
    if _number(a) and _number(b):
        mixed = (type(a) is float and isinstance(b, Decimal)) or (type(b) is float and isinstance(a, Decimal))
        if mixed and not phoenix:  # float8 with numeric is float8 in PostgreSQL (Phoenix: DECIMAL)
            a, b = float(a), float(b)
        if op == "/" and (isinstance(a, Decimal) or isinstance(b, Decimal)) and dialect != "cql":
            if b == 0:
                raise DivisionByZero("division by zero")
            a, b = _dec(a), _dec(b)
            return _phoenix_div(a, b) if phoenix else numeric_div(a, b)
        return _numeric(op, a, b)
    temporal = (dt.date, dt.timedelta, Interval)
    if isinstance(a, temporal) or isinstance(b, temporal):
        return _temporal(op, a, b, phoenix)
    raise unsupported(op, a, b)


#: CockroachDB's INT (INT8) range: integer arithmetic that leaves it fails (22003).
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _numeric(op: str, a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        r = _numeric_of(op, a, b)
        if (
            type(r) is int
            and not INT64_MIN <= r <= INT64_MAX
            and INT64_MIN <= a <= INT64_MAX
            and INT64_MIN <= b <= INT64_MAX
        ):
            # (an operand already past INT8, a YDB Uint64, keeps YDB's unsigned range)
            raise NumericValueOutOfRange("integer out of range")
        return r
    return _numeric_of(op, a, b)


def _numeric_of(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        a, b = _dec(a), _dec(b)
        if op == "+":
            return EXACT.add(a, b)
        if op == "-":
            return EXACT.subtract(a, b)
        if op == "*":
            return EXACT.multiply(a, b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%") and b == 0:
        raise DivisionByZero("division by zero")
    if op == "/":
        return int_quotient(a, b) if isinstance(a, int) and isinstance(b, int) else a / b
    if op == "%":
        return remainder(a, b)
    raise unsupported(op, a, b)


#: Apache Phoenix's ``PDataType.DEFAULT_MATH_CONTEXT``: 38 digits, half up.
_PHOENIX = Context(prec=38, rounding=ROUND_HALF_UP)


def _phoenix_div(a: Decimal, b: Decimal) -> Decimal:
    return _PHOENIX.divide(a, b)


def int_quotient(a: int, b: int) -> int:
    """Integer division truncated toward zero (``-7 / 2`` is -3), as PostgreSQL and YDB divide
    integers, not Python's floor; ``b`` is not 0."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def remainder(a: Any, b: Any) -> Any:
    """``a % b`` with the dividend's sign, as in PostgreSQL, CockroachDB and YDB (Python's int and
    float ``%`` take the divisor's; a Decimal's keeps the dividend's); ``b`` is not 0."""
    if isinstance(a, int) and isinstance(b, int):
        return a - b * int_quotient(a, b)
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(float(a), float(b))
    return EXACT.remainder(Decimal(a), Decimal(b))


def _as_datetime(d: dt.date) -> dt.datetime:
    return d if isinstance(d, dt.datetime) else dt.datetime(d.year, d.month, d.day)


def _plus_days(d: dt.date, days: Any, sign: int, phoenix: bool) -> dt.date:
    if not phoenix:
        if isinstance(d, dt.datetime) or not isinstance(days, int):
            raise unsupported("+" if sign > 0 else "-", d, days)
        return d + sign * dt.timedelta(days=days)
    ms = int((_dec(days) * _MS_PER_DAY).to_integral_value())  # Phoenix keeps milliseconds
    return _as_datetime(d) + sign * dt.timedelta(milliseconds=ms)


def _aligned(a: dt.datetime, b: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    if (a.tzinfo is None) != (b.tzinfo is None):
        return a.replace(tzinfo=None), b.replace(tzinfo=None)
    return a, b


def _temporal(op: str, a: Any, b: Any, phoenix: bool) -> Any:
    if isinstance(a, Interval) or isinstance(b, Interval):
        return _calendar(op, a, b)
    date_a, date_b = isinstance(a, dt.date), isinstance(b, dt.date)
    span_a, span_b = isinstance(a, dt.timedelta), isinstance(b, dt.timedelta)
    if op in ("+", "-") and date_a and _number(b):
        return _plus_days(a, b, 1 if op == "+" else -1, phoenix)
    if op == "+" and _number(a) and date_b:
        return _plus_days(b, a, 1, phoenix)
    if op == "-" and date_a and date_b:
        if not isinstance(a, dt.datetime) and not isinstance(b, dt.datetime):
            days = (a - b).days
            return Decimal(days) if phoenix else days
        x, y = _aligned(_as_datetime(a), _as_datetime(b))
        if phoenix:  # Phoenix: the days between them, as a DECIMAL of millisecond precision
            return Decimal((x - y) // dt.timedelta(milliseconds=1)) / _MS_PER_DAY
        return x - y
    if op in ("+", "-") and date_a and span_b:
        return _as_datetime(a) + b if op == "+" else _as_datetime(a) - b
    if op == "+" and span_a and date_b:
        return _as_datetime(b) + a
    if op in ("+", "-") and span_a and span_b:
        return a + b if op == "+" else a - b
    if op == "*" and ((span_a and _number(b)) or (_number(a) and span_b)):
        span, factor = (a, b) if span_a else (b, a)
        return dt.timedelta(microseconds=int(_dec(factor) * (span // dt.timedelta(microseconds=1))))
    if op == "/" and span_a and _number(b):
        if b == 0:
            raise DivisionByZero("division by zero")
        return dt.timedelta(microseconds=int((a // dt.timedelta(microseconds=1)) / _dec(b)))
    raise unsupported(op, a, b)


def _calendar(op: str, a: Any, b: Any) -> Any:
    """Arithmetic with an interval of months (``changefeed.engine.intervals``): a date or
    timestamp moves by calendar months, intervals add field by field and scale with their
    fractions spilling down, as in PostgreSQL."""
    spans = (dt.timedelta, Interval)
    if op in ("+", "-") and isinstance(a, dt.date) and isinstance(b, Interval):
        moved = add_interval(a, b, 1 if op == "+" else -1)
        if isinstance(a, dt.datetime) and a.tzinfo is not None:
            return moved.replace(tzinfo=a.tzinfo)
        return moved
    if op == "+" and isinstance(a, Interval) and isinstance(b, dt.date):
        return _calendar("+", b, a)
    if op in ("+", "-") and isinstance(a, spans) and isinstance(b, spans):
        return combine(a, b, 1 if op == "+" else -1)
    if op == "*" and isinstance(a, Interval) and _number(b):
        return scale(a, _dec(b))
    if op == "*" and _number(a) and isinstance(b, Interval):
        return scale(b, _dec(a))
    if op == "/" and isinstance(a, Interval) and _number(b):
        if b == 0:
            raise DivisionByZero("division by zero")
        return scale(a, _dec(b), divide=True)
    raise unsupported(op, a, b)


__all__ = ["INT64_MAX", "INT64_MIN", "arithmetic", "unsupported"]
