"""The errors the protocol layer raises itself, each with PostgreSQL's SQLSTATE."""

from __future__ import annotations

from changefeed.exceptions import ChangefeedError, TransactionError


class CancelledQuery(ChangefeedError):
    code = "57014"


class AbortedTransaction(TransactionError):
    code = "25P02"


class AdminShutdown(ChangefeedError):
    code = "57P01"


class Unsupported(ChangefeedError):
    code = "0A000"


class InvalidValue(ChangefeedError):
    code = "22023"


class UndefinedVariable(ChangefeedError):
    code = "42704"


class UndefinedQuery(ChangefeedError):
    code = "42704"


class DuplicateStatement(ChangefeedError):
    code = "42P05"


class UndefinedStatement(ChangefeedError):
    code = "26000"


class DuplicateCursor(ChangefeedError):
    code = "42P03"


class UndefinedCursor(ChangefeedError):
    code = "34000"
