"""Reading a SQLite result column-wise without a Python object per value.

``sqlite3`` hands a result over as one tuple per row and one Python object per value, which costs
more than everything done with the values afterwards when a CDC log window of many rows is read.
Here SQLite's ``group_concat`` lays each column of a chunk of rows out as one string (integers as
decimal text, text and blobs end to end with their lengths alongside, nulls as a '0'/'1' string),
and numpy and Arrow parse those strings in C: a handful of Python objects per chunk.

Only integer, text and blob columns are read this way (a REAL's text form is not exact). Every
aggregate sees the rows in one order, so the columns stay aligned. Storage classes are not
checked value by value (``typeof`` per value costs as much as the read): integer text that does
not parse to exactly one integer a row, lengths that do not add up to the text, or anything SQLite
refuses (a chunk past its string limit) make :func:`read_columns` return None: read those with
``sqlite3``'s tuples.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

#: Rows per chunk (one query each).
CHUNK_ROWS = 1 << 16
_CLASS = {pa.int64(): "integer", pa.string(): "text", pa.binary(): "blob"}


def read_columns(
    conn: sqlite3.Connection,
    table: str,
    exprs: Sequence[str],
    classes: Sequence[pa.DataType],
    where: Sequence[str],
    params: Sequence[Any],
    nullable: Sequence[bool],
) -> list[pa.Array] | None:
    """The values of ``exprs`` (``classes[i]``: int64, string or binary) over the rows of
    ``table`` matching ``where``, in ``seq`` order (``seq`` is the table's INTEGER PRIMARY KEY),
    as Arrow arrays; None when they cannot be read this way."""
    if any(c not in _CLASS for c in classes):
        return None
    aggs: list[str] = ["count(*)", "max(seq)"]
    for e, c in zip(exprs, classes, strict=True):
        if _CLASS[c] == "integer":
            aggs.append(f"CAST(group_concat(ifnull({e}, 0)) AS BLOB)")
        else:
            aggs.append(f"CAST(group_concat(ifnull(length(CAST({e} AS BLOB)), 0)) AS BLOB)")
            aggs.append(f"CAST(group_concat(ifnull(CAST({e} AS BLOB), x''), '') AS BLOB)")
    # which values are null: one integer a row per group of up to 62 nullable expressions
    maybe_null = [i for i, null in enumerate(nullable) if null]
    groups = [maybe_null[k : k + 62] for k in range(0, len(maybe_null), 62)]
    for g in groups:
        # (SQLite's << and | share one precedence: every term in its own parentheses)
        bits = " | ".join(f"((({exprs[i]}) IS NULL) << {b})" for b, i in enumerate(g))
        aggs.append(f"CAST(group_concat({bits}) AS BLOB)")
    conds = " AND ".join([*where, "seq > ?"])
    sql = (
        f"SELECT {', '.join(aggs)} FROM (SELECT * FROM {table} WHERE {conds} ORDER BY seq LIMIT {CHUNK_ROWS})"
    )
    chunks: list[list[pa.Array]] = []
    after = -(1 << 63)
    while True:
        try:
            row = conn.execute(sql, [*params, after]).fetchone()
        except (sqlite3.DataError, sqlite3.OperationalError):
            return None  # a chunk past SQLite's string limit
        n = int(row[0])
        if n == 0:
            break
        parsed = _parse(row, n, classes, groups)
        if parsed is None:
            return None
        chunks.append(parsed)
        after = int(row[1])
        if n < CHUNK_ROWS:
            break
    if not chunks:
        return [pa.array([], type=c) for c in classes]
    if len(chunks) == 1:
        return chunks[0]
    return [pa.concat_arrays([ch[i] for ch in chunks]) for i in range(len(classes))]


def _parse(
    row: tuple[Any, ...], n: int, classes: Sequence[pa.DataType], groups: list[list[int]]
) -> list[pa.Array] | None:
    parts: list[list[Any]] = []
    at = 2
    for c in classes:
        if _CLASS[c] == "integer":
            values = _ints(row[at], n)
            at += 1
            if values is None:
                return None
            parts.append([values])
        else:
            lengths = _ints(row[at], n)
            data = row[at + 1] or b""
            at += 2
            if lengths is None or int(lengths.sum()) != len(data):
                return None
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            parts.append([offsets, data])
    valid: dict[int, np.ndarray] = {}
    for g in groups:
        bits = _ints(row[at], n)
        at += 1
        if bits is None:
            return None
        for b, i in enumerate(g):
            null_at = (bits >> b) & 1 == 1
            if null_at.any():
                valid[i] = ~null_at
    return [_array(c, n, p, valid.get(i)) for i, (c, p) in enumerate(zip(classes, parts, strict=True))]


def _ints(text: bytes | None, n: int) -> np.ndarray | None:
    if not text:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # text numpy cannot read to its end: not ours to guess
        try:
            values: np.ndarray = np.fromstring(text, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return values if len(values) == n else None


def _array(c: pa.DataType, n: int, parts: list[Any], valid: np.ndarray | None) -> pa.Array:
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    nulls = 0 if valid is None else int(n - valid.sum())
    buffers = [bitmap, *(pa.py_buffer(p) for p in parts)]
    return pa.Array.from_buffers(c, n, buffers, null_count=nulls)


__all__ = ["CHUNK_ROWS", "read_columns"]
