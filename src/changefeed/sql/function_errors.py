"""The two errors every function of the SQL dialect raises for bad arguments, made one way."""

from __future__ import annotations

from typing import Any

from changefeed.engine.type_errors import value_type
from changefeed.exceptions import InvalidArgument, UndefinedFunction

__all__ = ["invalid_argument", "unknown_signature"]


def invalid_argument(message: str, code: str) -> InvalidArgument:
    """An argument outside what the function takes, with PostgreSQL's own code for it (22011
    substring, 2201E logarithm, 22014 ntile ..)."""
    exc = InvalidArgument(message)
    exc.code = code
    return exc


def unknown_signature(name: str, args: tuple[Any, ...]) -> UndefinedFunction:
    """CockroachDB's ``unknown signature: f(int, string)`` (42883) for the argument values given."""
    return UndefinedFunction(f"unknown signature: {name}({', '.join(value_type(a) for a in args)})")
