"""Avro binary for a whole Arrow batch at once, column by column (numpy and Arrow kernels).

An Avro record's binary form is the concatenation of its fields' encodings, and a nullable union
``["null", T]`` is the branch index as a zig-zag varint (``0x00`` null, ``0x02`` the value) then
the value. So a batch of records is written without a Python step per row:

* each field of fixed-shape type (``long``/``int`` and their date/time logical types, ``double``,
  ``boolean``, the head of ``string``/``bytes``) becomes a *segment*: a ``(rows, width)`` uint8
  matrix and the number of bytes each row uses (``0x00`` alone for a null, nothing at all where
  the enclosing record is absent);
* consecutive segments are one matrix side by side: a boolean mask "byte j of row i is used",
  applied to it in row-major order, yields exactly the concatenation of every row's used bytes,
  which with the cumulated lengths is an Arrow ``binary`` array;
* string and bytes payloads stay the Arrow column they are (a null contributes nothing);
* the pieces are joined row-wise by Arrow's ``binary_join_element_wise``.

Types this module does not write (decimal, arrays, BIT, ...) come in as one byte string per row
from :func:`changefeed.formats.crdb_avro.field_bytes` (fastavro), as a piece like the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pyarrow as pa

Bytes2D = npt.NDArray[np.uint8]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

NULL_BRANCH = 0x00
VALUE_BRANCH = 0x02


def binary_from(data: npt.NDArray[np.uint8], lengths: Ints) -> pa.BinaryArray:
    """An Arrow ``binary`` array over a flat byte buffer cut into consecutive runs of ``lengths``."""
    import pyarrow as pa

    ends = np.cumsum(lengths, dtype=np.int64)
    if len(ends) and ends[-1] > np.iinfo(np.int32).max:
        raise OverflowError(f"{int(ends[-1])} bytes in one binary column: encode smaller batches")
    offsets = np.zeros(len(lengths) + 1, np.int32)
    offsets[1:] = ends
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def zigzag_matrix(values: Ints) -> tuple[Bytes2D, Ints]:
    """Avro ``long`` encodings of ``values``: a ``(n, width)`` matrix and each row's byte count."""
    n = len(values)
    v = values.astype(np.int64, copy=False)
    z = (v.view(np.uint64) << np.uint64(1)) ^ (v >> np.int64(63)).view(np.uint64)
    top = int(z.max()) if n else 0
    width = max(1, (top.bit_length() + 6) // 7)
    used = np.ones(n, np.int64)
    for k in range(1, width):
        used += z >= np.uint64(1 << (7 * k))
    mat = np.empty((n, width), np.uint8)
    for k in range(width):
        byte = (z >> np.uint64(7 * k)) & np.uint64(0x7F)
        if k < width - 1:
            byte |= (used > k + 1).astype(np.uint64) << np.uint64(7)
        mat[:, k] = byte
    return mat, used


class RowWriter:
    """The binary rows of a batch, written left to right, field by field.

    ``present`` masks (one bool per row, None: every row) say where the enclosing record exists:
    an absent row gets nothing from the field, not even the null branch.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._mats: list[Bytes2D] = []
        self._lens: list[Ints] = []
        self._pieces: list[pa.Array] = []

    # ------------------------------------------------------------------ segments
    def segment(self, mat: Bytes2D, lengths: Ints | None, present: Mask | None = None) -> None:
        """Row i gets ``mat[i, :lengths[i]]`` (all of it when ``lengths`` is None)."""
        if lengths is None:
            lengths = np.full(self.n, mat.shape[1], np.int64)
        if present is not None:
            lengths = np.where(present, lengths, 0)
        self._mats.append(mat)
        self._lens.append(lengths)

    def constant(self, data: bytes, present: Mask | None = None) -> None:
        if data:
            row = np.frombuffer(data, np.uint8)
            self.segment(np.broadcast_to(row, (self.n, len(row))), None, present)

    def branch(self, valid: Mask | None, present: Mask | None = None) -> None:
        """A union branch byte alone: the value's branch where ``valid``, null elsewhere."""
        col = np.full((self.n, 1), VALUE_BRANCH, np.uint8)
        if valid is not None:
            col[~valid, 0] = NULL_BRANCH
        self.segment(col, None, present)

    def union_value(
        self, mat: Bytes2D, lengths: Ints | None, valid: Mask | None, present: Mask | None = None
    ) -> None:
        """``["null", T]``: branch byte, then the value (``mat``/``lengths``) where ``valid``."""
        full = np.empty((self.n, mat.shape[1] + 1), np.uint8)
        full[:, 0] = VALUE_BRANCH
        full[:, 1:] = mat
        if lengths is None:
            lengths = np.full(self.n, mat.shape[1], np.int64)
        lengths = lengths + 1
        if valid is not None:
            full[~valid, 0] = NULL_BRANCH
            lengths = np.where(valid, lengths, 1)
        self.segment(full, lengths, present)

    def union_long(self, values: Ints, valid: Mask | None, present: Mask | None = None) -> None:
        mat, used = zigzag_matrix(values)
        self.union_value(mat, used, valid, present)

    def union_double(
        self, values: npt.NDArray[np.float64], valid: Mask | None, present: Mask | None = None
    ) -> None:
        mat = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(self.n, 8)
        self.union_value(mat, None, valid, present)

    def union_boolean(self, values: Mask, valid: Mask | None, present: Mask | None = None) -> None:
        self.union_value(values.astype(np.uint8).reshape(self.n, 1), None, valid, present)

    def union_binary(self, arr: pa.Array, present: Mask | None = None) -> None:
        """``["null", string|bytes]`` from an Arrow string/binary column (its nulls are the nulls)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        data = arr.cast(pa.binary())
        valid = None if data.null_count == 0 else np.asarray(data.is_valid())
        sizes = np.asarray(pc.binary_length(data).fill_null(0), np.int64)
        self.union_long(sizes, valid, present)
        if present is not None and not present.all():
            data = pc.if_else(pa.array(present), data, pa.scalar(None, pa.binary()))
        self.piece(data)

    # ------------------------------------------------------------------ pieces
    def piece(self, arr: pa.Array) -> None:
        """An Arrow binary column taken as is (nulls and empty values contribute nothing)."""
        self._flush()
        self._pieces.append(arr)

    def _flush(self) -> None:
        if not self._mats:
            return
        mats, lens = self._mats, self._lens
        self._mats, self._lens = [], []
        mat = mats[0] if len(mats) == 1 else np.hstack(mats)
        total = lens[0] if len(lens) == 1 else np.sum(lens, axis=0)
        if all(int(ln.min(initial=m.shape[1])) == m.shape[1] for m, ln in zip(mats, lens, strict=True)):
            data = np.ascontiguousarray(mat).reshape(-1)
        else:
            mask = np.hstack([np.arange(m.shape[1]) < ln[:, None] for m, ln in zip(mats, lens, strict=True)])
            data = mat[mask]
        self._pieces.append(binary_from(data, total))

    def finish(self) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        self._flush()
        if not self._pieces:
            return pa.array([b""] * self.n, pa.binary())
        if len(self._pieces) == 1:
            only = self._pieces[0]
            return only.fill_null(b"") if only.null_count else only
        empty = pa.scalar(b"", pa.binary())
        return pc.binary_join_element_wise(*self._pieces, empty, null_handling="skip")
