"""Rows of a result encoded column-wise: each column's cells built at once with numpy and Arrow,
then every row's cells laid end to end by ``binary_join_element_wise``, so the joined array's data
buffer *is* the rows part of a Rows RESULT, and a page is a slice of it.

Integers, booleans, doubles, text, blobs and 16-byte (time)uuids are packed as arrays; any other
type, and any column given as Python values, goes value by value through its encoder
(:func:`changefeed.server.cql.types.encoder`). The bytes are those of
:func:`changefeed.server.cql.types.rows_encoder` for the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.server.cql import types as t
from changefeed.server.cql.types import CqlType, encoder

#: Rows joined per Arrow array (keeps every array's 32-bit offsets far from their limit).
CHUNK_ROWS = 1 << 16

_NULL_CELL = pa.scalar(b"\xff\xff\xff\xff", type=pa.binary())
#: Fixed-width integer types: (value width in bytes, numpy big-endian type).
_INTS = {
    t.TINYINT: (1, ">i1"),
    t.SMALLINT: (2, ">i2"),
    t.INT: (4, ">i4"),
    t.BIGINT: (8, ">i8"),
    t.COUNTER: (8, ">i8"),
}


class EncodedRows:
    """The cells of ``len(self)`` rows, end to end, in chunks of joined rows."""

    def __init__(self, chunks: Sequence[pa.Array], rows: int) -> None:
        self._chunks = list(chunks)
        self._rows = rows
        self._starts = np.cumsum([0] + [len(c) for c in self._chunks], dtype=np.int64)

    def __len__(self) -> int:
        return self._rows

    def cells(self, lo: int, hi: int) -> bytes:
        """The cells of rows ``lo`` to ``hi`` (exclusive), end to end."""
        lo, hi = max(0, lo), min(hi, self._rows)
        parts: list[bytes] = []
        if lo >= hi:
            return b""
        first = int(np.searchsorted(self._starts, lo, side="right")) - 1
        for ci in range(first, len(self._chunks)):
            base = int(self._starts[ci])
            if base >= hi:
                break
            chunk = self._chunks[ci]
            a, b = max(lo, base) - base, min(hi, base + len(chunk)) - base
            offsets = np.frombuffer(
                chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4
            )
            data = chunk.buffers()[2]
            if data is not None:
                parts.append(bytes(memoryview(data)[int(offsets[a]) : int(offsets[b])]))
        return b"".join(parts)


def encode_rows(values: Sequence[pa.Array | list[Any]], types: Sequence[CqlType], rows: int) -> EncodedRows:
    """The rows whose column ``i`` holds ``values[i]`` (an Arrow array or Python values) of CQL
    type ``types[i]``, encoded."""
    chunks: list[pa.Array] = []
    for lo in range(0, rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, rows - lo)
        cols = [cells(_slice(v, lo, n), ty) for v, ty in zip(values, types, strict=True)]
        if not cols:
            continue
        chunks.append(pc.binary_join_element_wise(*cols, b""))
    return EncodedRows(chunks, rows)


def _slice(v: pa.Array | list[Any], lo: int, n: int) -> pa.Array | list[Any]:
    return v.slice(lo, n) if isinstance(v, pa.Array) else v[lo : lo + n]


def cells(values: pa.Array | list[Any], ty: CqlType) -> pa.Array:
    """A binary array of the cells (``[int]`` length, then the value; ``-1`` for null) of
    ``values`` as CQL type ``ty``."""
    py: list[Any]
    if isinstance(values, pa.Array):
        packed = _packed(values, ty)
        if packed is not None:
            if values.null_count:
                return pc.if_else(values.is_valid(), packed, _NULL_CELL)
            return packed
        if pa.types.is_fixed_size_binary(values.type):
            raise TypeError(f"no encoding of 16-byte binaries as {ty}")
        py = values.to_pylist()
    else:
        py = values
    enc = encoder(ty)
    return pa.array([enc(v) for v in py], type=pa.binary())


def _packed(values: pa.Array, ty: CqlType) -> pa.Array | None:
    """The cells of a column whose Arrow type packs as a whole (nulls come out as garbage cells
    the caller replaces), or None."""
    at = values.type
    n = len(values)
    k = ty.id
    if k in _INTS and pa.types.is_integer(at):
        width, dtype = _INTS[k]
        ints = values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        info = np.iinfo(np.dtype(dtype).newbyteorder("="))
        if n and (int(ints.min()) < info.min or int(ints.max()) > info.max):
            return None  # out of range: the value-by-value encoder says so
        return _fixed_cells(width, ints.astype(dtype), n)
    if k == t.BOOLEAN and pa.types.is_boolean(at):
        flags = values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        return _fixed_cells(1, flags, n)
    if k == t.DOUBLE and pa.types.is_floating(at):
        doubles = values.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
        return _fixed_cells(8, doubles.astype(">f8"), n)
    if k in (t.UUID, t.TIMEUUID, t.BLOB) and pa.types.is_fixed_size_binary(at):
        width = at.byte_width
        if k != t.BLOB and width != 16:
            return None
        data = values.buffers()[1]
        raw = np.frombuffer(data, dtype=np.uint8)[values.offset * width : (values.offset + n) * width]
        return _fixed_cells(width, raw.reshape(n, width) if n else raw.reshape(0, width), n)
    if (k in (t.VARCHAR, t.ASCII) and pa.types.is_string(at)) or (k == t.BLOB and pa.types.is_binary(at)):
        body = values.cast(pa.binary()).fill_null(b"")
        lengths = pc.binary_length(body).to_numpy(zero_copy_only=False).astype(">i4")
        return pc.binary_join_element_wise(_fixed(lengths.tobytes(), 4, n), body, b"")
    return None


def _fixed_cells(width: int, packed: np.ndarray, n: int) -> pa.Array:
    """Cells of one width: the length word, then each value's ``width`` big-endian bytes."""
    out = np.empty(n, dtype=[("n", ">i4"), ("v", np.uint8, (width,))])
    out["n"] = width
    out["v"] = packed.view(np.uint8).reshape(n, width) if n else np.empty((0, width), np.uint8)
    return _fixed(out.tobytes(), 4 + width, n)


def _fixed(data: bytes, width: int, n: int) -> pa.Array:
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(data)]).cast(
        pa.binary()
    )


__all__ = ["CHUNK_ROWS", "EncodedRows", "cells", "encode_rows"]
