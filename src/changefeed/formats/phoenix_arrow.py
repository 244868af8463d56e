"""The ``"CDC JSON"`` of a batch of changes built column-wise in Arrow, text-identical to
:class:`~changefeed.formats.phoenix_batch.BatchEncoder` (and so to the per-event encoder).

The batch encoder joins each change's rendered values into its shape's ``%``-template one change
at a time. Here the values come as Arrow arrays (the ADBC SQLite driver reads them so, in
Spark's Python workers) and stay there: a column's texts are one Arrow kernel where Arrow writes
exactly what Jackson writes for Phoenix's value (integers, booleans, VARCHAR without characters
to escape, DOUBLE in Java's plain range), and each shape's template is one
``binary_join_element_wise`` of its text pieces and value columns. Values Arrow cannot spell
that way go through the scalar renderers, a column or a value at a time.

DOUBLE: Arrow's float-to-string cast writes the shortest digits that read back as the same
double, as Python's ``repr`` and Java's ``Double.toString`` do; in Java's plain range
(``1e-3 <= |x| < 1e7``, and zero) the spelling differs only in the ``.0`` Java and ``repr`` add
to integral values, which is appended (``tests/test_phoenix_arrow.py`` compares the two over
random bit patterns, integers and the range's edges).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.types import Kind, SqlType

__all__ = ["column_texts", "double_array", "double_texts", "encode_arrow"]

#: A character Jackson escapes in a string: quote, backslash, control characters.
_ESCAPED = '["\\\\\\x00-\\x1f]'


def double_array(a: pa.Array, one: Callable[[Any], str]) -> pa.Array:
    """Java's ``Double.toString`` of a float64 column as a string array (``null`` for NULL):
    Arrow's cast for the values in the plain range, ``one`` for the others."""
    mag = pc.abs(a)
    plain = pc.or_(pc.equal(mag, 0.0), pc.and_(pc.greater_equal(mag, 1e-3), pc.less(mag, 1e7)))
    t = pc.cast(a, pa.string())
    t = pc.fill_null(
        pc.if_else(pc.match_substring(t, "."), t, pc.binary_join_element_wise(t, ".0", "")), "null"
    )
    odd = pc.invert(pc.fill_null(plain, True))  # NaN compares false: not plain
    if pc.any(odd).as_py():
        values = a.filter(odd).to_pylist()
        t = pc.replace_with_mask(t, odd, pa.array([one(v) for v in values], type=pa.string()))
    return t


def double_texts(x: np.ndarray[Any, Any], one: Callable[[Any], str]) -> list[str]:
    """:func:`double_array` of a float64 numpy array (no NULLs) as a list, without Python
    scalars in any Arrow call (converting one makes pyarrow import pandas, ~0.3 s of CPU once
    per process): Arrow casts, numpy finds the integral values (``.0`` appended) and the values
    outside the plain range (``one``)."""
    out: list[str] = pc.cast(
        pa.Array.from_buffers(pa.float64(), len(x), [None, pa.py_buffer(x)]), pa.string()
    ).to_pylist()
    with np.errstate(invalid="ignore"):  # NaN and the infinities are not plain
        mag = np.abs(x)
        plain = (mag == 0) | ((mag >= 1e-3) & (mag < 1e7))
        whole = plain & (x == np.trunc(x))
    for j in np.flatnonzero(whole).tolist():
        out[j] += ".0"
    for j in np.flatnonzero(~plain).tolist():
        out[j] = one(float(x[j]))
    return out


def column_texts(
    t: SqlType, one: Callable[[Any], str], column: Callable[[Sequence[Any]], list[str]], a: pa.Array
) -> pa.Array:
    """The JSON texts of a column of storage values read as Arrow (``null`` for NULL): in Arrow
    where its spelling is Jackson's, else ``column`` (the scalar column renderer) over Python
    values."""
    k = t.kind
    if (k is Kind.INT or (k is Kind.UINT and t.bits < 64)) and pa.types.is_int64(a.type):
        return pc.fill_null(pc.cast(a, pa.string()), "null")
    if k is Kind.BOOL and pa.types.is_int64(a.type):
        return pc.fill_null(pc.if_else(pc.not_equal(a, 0), "true", "false"), "null")
    if k is Kind.FLOAT and t.bits == 64 and pa.types.is_float64(a.type):
        return double_array(a, one)
    text = k is Kind.TEXT and not t.name.startswith("CHAR(") and pa.types.is_string(a.type)
    if text and not pc.any(pc.match_substring_regex(a, _ESCAPED)).as_py():
        return pc.fill_null(pc.binary_join_element_wise('"', a, '"', ""), "null")
    return pa.array(column(a.to_pylist()), type=pa.string())


def encode_arrow(
    batch: Any,
    types: Sequence[SqlType],
    code: np.ndarray[Any, Any],
    differs: Callable[[], np.ndarray[Any, Any]],
    new: Sequence[pa.Array],
    old: Sequence[pa.Array] | None,
) -> pa.Array:
    """The texts of a batch (a string array): ``batch`` a
    :class:`~changefeed.formats.phoenix_batch.BatchEncoder`, ``code`` the shape bits of each
    change, ``differs()`` its differs bits, ``new``/``old`` the value columns (``old`` None when
    no PRE image is asked for)."""
    n = len(code)
    enc = batch.enc
    nv = len(types)
    texts: list[list[pa.Array | None]] = [[None] * nv, [None] * nv]

    def text(kind: int, i: int) -> pa.Array:
        got = texts[kind][i]
        if got is None:
            src = new if kind == 0 else old
            assert src is not None
            got = texts[kind][i] = column_texts(types[i], enc.render[i], enc.render_column[i], src[i])
        return got

    parts: list[pa.Array] = []
    rows: list[np.ndarray[Any, Any]] = []
    for part, c, rewrite in batch.groups(code, differs):
        pieces, slots = batch.pieces(c, rewrite)
        m = n if part is None else len(part)
        if not slots:
            got = pc.fill_null(pa.nulls(m, pa.string()), pieces[0])
        else:
            take = None if part is None else pa.array(part, type=pa.int64())
            args: list[Any] = [pieces[0]]
            for (kind, i), piece in zip(slots, pieces[1:], strict=True):
                col = text(kind, i)
                args += [col if take is None else col.take(take), piece]
            got = pc.binary_join_element_wise(*args, "")
        if part is None:
            return got
        parts.append(got)
        rows.append(part)
    order = np.argsort(np.concatenate(rows), kind="stable")
    return pa.concat_arrays(parts).take(pa.array(order, type=pa.int64()))
