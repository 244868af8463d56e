"""CQL's own scalar functions beyond ``now()``/``toTimestamp()``: the timeuuid bounds a CDC log
reader picks a time window with (``WHERE "cdc$time" > minTimeuuid('2024-05-01 10:00+0000')``),
the old spellings of the timeuuid conversions, and the text/blob conversions."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from changefeed.engine.clock import GREGORIAN_OFFSET, timeuuid_bound
from changefeed.engine.temporal_text import parse_timestamp
from changefeed.engine.type_errors import sql_text
from changefeed.engine.types import UTC
from changefeed.exceptions import TypeMismatch

__all__ = ["CQL_FUNCTIONS", "timeuuid_time"]


def _millis(v: Any, name: str) -> int:
    """A timestamp argument (a timestamp, its text, or milliseconds since the epoch) in ms."""
    if isinstance(v, str):
        try:
            v = parse_timestamp(v)
        except ValueError:
            raise TypeMismatch(f"Unable to coerce '{v}' to a formatted date (long) in {name}") from None
    if isinstance(v, dt.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=UTC)
        delta = aware - dt.datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise TypeMismatch(f"Type error: {sql_text(v)} cannot be passed as argument 0 of function {name}")


def _bound(name: str, upper: bool) -> Callable[[Any], uuid.UUID | None]:
    def fn(v: Any) -> uuid.UUID | None:
        return None if v is None else timeuuid_bound(_millis(v, name), upper=upper)

    return fn


def timeuuid_time(v: Any) -> dt.datetime:
    """The time a version-1 UUID carries (``toTimestamp``, ``dateOf``), to the microsecond."""
    if not isinstance(v, uuid.UUID) or v.version != 1:
        raise TypeMismatch(f"expected a timeuuid, got {sql_text(v)}")
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=(v.time - GREGORIAN_OFFSET) // 10)


def _blob_as_text(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeMismatch(f"Type error: {sql_text(v)} cannot be passed as argument 0 of function blobastext")
    try:
        return bytes(v).decode("utf-8")
    except UnicodeDecodeError:
        raise TypeMismatch("Invalid UTF-8 bytes in blobAsText") from None


def _text_as_blob(v: Any) -> bytes | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeMismatch(f"Type error: {sql_text(v)} cannot be passed as argument 0 of function textasblob")
    return v.encode("utf-8")


CQL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "mintimeuuid": _bound("mintimeuuid", False),
    "maxtimeuuid": _bound("maxtimeuuid", True),
    # Cassandra 2's names for toTimestamp/toUnixTimestamp of a timeuuid
    "dateof": lambda v: None if v is None else timeuuid_time(v),
    "unixtimestampof": lambda v: None if v is None else _millis(timeuuid_time(v), "unixtimestampof"),
    "blobastext": _blob_as_text,
    "blobasvarchar": _blob_as_text,
    "blobasascii": _blob_as_text,
    "textasblob": _text_as_blob,
    "varcharasblob": _text_as_blob,
    "asciiasblob": _text_as_blob,
}
