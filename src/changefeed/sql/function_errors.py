"""The errors every function and operator of the SQL dialect raises for bad arguments, made one
way; and what an arithmetic error Python raised while evaluating becomes."""

from __future__ import annotations

from typing import Any

from changefeed.engine.type_errors import value_type
from changefeed.exceptions import (
    ChangefeedError,
    DatetimeFieldOverflow,
    DivisionByZero,
    InvalidArgument,
    NumericValueOutOfRange,
    UndefinedFunction,
)

__all__ = ["arithmetic_error", "invalid_argument", "unknown_signature"]


def invalid_argument(message: str, code: str) -> InvalidArgument:
    """An argument outside what the function takes, with PostgreSQL's own code for it (22011
    substring, 2201E logarithm, 22014 ntile ..)."""
    exc = InvalidArgument(message)
    exc.code = code
    return exc


def unknown_signature(name: str, args: tuple[Any, ...]) -> UndefinedFunction:
    """CockroachDB's ``unknown signature: f(int, string)`` (42883) for the argument values given."""
    return UndefinedFunction(f"unknown signature: {name}({', '.join(value_type(a) for a in args)})")


def arithmetic_error(exc: ArithmeticError) -> ChangefeedError:
    """What a ``ZeroDivisionError``, ``OverflowError`` or ``decimal`` error raised by a value's
    own arithmetic while a statement ran means in SQL: ``22012`` division by zero, ``22008`` a
    date or time out of range, else ``22003`` a value out of range (PostgreSQL's codes). The
    statement fails and changes nothing, as with any other error."""
    if isinstance(exc, ZeroDivisionError):
        return DivisionByZero("division by zero")
    text = str(exc)
    if any(word in text for word in ("date", "year", "days", "time")):
        return DatetimeFieldOverflow("date/time value out of range")
    return NumericValueOutOfRange(f"value out of range: {text}" if text else "value out of range")
