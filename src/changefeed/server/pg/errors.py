"""The errors the protocol layer raises itself, each with PostgreSQL's SQLSTATE, and the
SQLSTATE and message any error of a statement goes out with (:func:`sqlstate_of`)."""

from __future__ import annotations

import logging
import re
import sqlite3

from changefeed.exceptions import ChangefeedError, TransactionError

_log = logging.getLogger(__name__)


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


class WrongParameterCount(ChangefeedError):
    """EXECUTE of a prepared statement with too few or too many arguments."""

    code = "42601"


class DuplicateCursor(ChangefeedError):
    code = "42P03"


class UndefinedCursor(ChangefeedError):
    code = "34000"


def sqlstate_of(exc: BaseException, *, cancelled: bool, session_id: object) -> tuple[str, str]:
    """The SQLSTATE and message of a statement's error: a ``ChangefeedError``'s own code (a
    missing table in PostgreSQL's words), SQLite's interruption as 57014 and its lock errors as
    40001; anything else is a bug, not the client's doing: XX000, with the details in the
    server's log (``session_id`` names the session there), never in the message."""
    if isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
        return "57014", "canceling statement due to user request"
    if isinstance(exc, ChangefeedError):
        if cancelled and "interrupt" in str(exc):
            return "57014", "canceling statement due to user request"
        text = str(exc)
        if exc.code == "42P01":  # PostgreSQL's words for a missing table
            text = re.sub(r'^table ("[^"]*") does not exist', r"relation \1 does not exist", text)
        return exc.code, text
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "interrupt" in text:
            return "57014", "canceling statement due to user request"
        if "locked" in text or "busy" in text:
            return "40001", "restart transaction: the database is locked by another writer"
    _log.error("internal error in session %s", session_id, exc_info=exc)
    return "XX000", "internal error: the statement failed unexpectedly (the server log has the details)"
