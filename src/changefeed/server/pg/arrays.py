"""One-dimensional PostgreSQL arrays as bound parameters in the binary wire form (a client's
``WHERE id = ANY($1)`` with a list: psycopg, asyncpg and pgjdbc send ``int8[]``, ``text[]`` and
the like; the text form is ``changefeed.engine.array_text``'s).

Binary (array_recv): dimensions, a has-NULLs flag, the element type's OID, each dimension's
length and lower bound, then each element as a length (-1: NULL) and its bytes. Arrays of more
than one dimension are refused (ValueError, one of the decode errors)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

__all__ = ["array_from_binary"]

_HEAD = struct.Struct("!iii")
_DIM = struct.Struct("!ii")
_LEN = struct.Struct("!i")


def array_from_binary(data: bytes, element: Callable[[bytes, int], Any]) -> list[Any]:
    """The elements of a one-dimensional array's binary form, each through ``element(bytes,
    element OID)``."""
    ndim, _has_nulls, oid = _HEAD.unpack_from(data, 0)
    if ndim == 0:
        return []
    if ndim != 1:
        raise ValueError("arrays of more than one dimension are not supported")
    count, _lower = _DIM.unpack_from(data, _HEAD.size)
    if count < 0:
        raise ValueError("negative array length")
    at = _HEAD.size + _DIM.size
    out: list[Any] = []
    for _ in range(count):
        (length,) = _LEN.unpack_from(data, at)
        at += _LEN.size
        if length < 0:
            out.append(None)
            continue
        if at + length > len(data):
            raise ValueError("array element past the end of the value")
        out.append(element(data[at : at + length], oid))
        at += length
    if at != len(data):
        raise ValueError("bytes after the array's last element")
    return out
