"""Rows to wire bytes: per-column encoders chosen once per result, then applied row by row."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from changefeed.connection import Result
from changefeed.engine.types import SqlType
from changefeed.server.pg import types as t
from changefeed.server.pg.protocol import data_row
from changefeed.sql import ast
from changefeed.sql.text_out import float4_text

if TYPE_CHECKING:
    import pyarrow as pa

Encoder = Callable[[Any], bytes]


def _text_str(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else t.text_value(v).encode()


def _text_int(v: Any) -> bytes:
    return str(v).encode() if type(v) is int else t.text_value(v).encode()


def _text_float4(v: Any) -> bytes:
    return float4_text(v).encode() if type(v) is float else t.text_value(v).encode()


def _text_array(v: Any) -> bytes:
    return t.text_array(v).encode()


def _text_any(v: Any) -> bytes:
    return t.text_value(v).encode()


def column_oids(types: Sequence[SqlType | None], rows: Sequence[tuple[Any, ...]], width: int) -> list[int]:
    """OIDs of a result's columns: by engine type, else by the first non-NULL value."""
    oids = []
    for i in range(width):
        st = types[i] if i < len(types) else None
        sample = None
        if st is None:
            sample = next((r[i] for r in rows if r[i] is not None), None)
        oids.append(t.oid_of(st, sample))
    return oids


#: Described types whose wire form, text or binary, is the text of any value.
_TEXT_LIKE = frozenset({t.TEXT, t.VARCHAR, t.NAME, t.UNKNOWN})


def as_described(
    oids: Sequence[int], encs: Sequence[Encoder], fmts: Sequence[int], described: Sequence[int]
) -> tuple[list[int], list[Encoder], list[int]]:
    """A result's OIDs, encoders and formats (:func:`encoders`) made to send its columns as the
    types ``described`` to the client before the statement ran (Describe of a statement), where
    the rows' own types differ: a column described as text gets each value's text (the same
    bytes in either format); any other gets the described type's encoder. A result of another
    width is left as it is."""
    out_oids, out_encs, out_fmts = list(oids), list(encs), list(fmts)
    if len(described) != len(oids):
        return out_oids, out_encs, out_fmts
    for i, (own, told) in enumerate(zip(oids, described, strict=True)):
        if own == told:
            continue
        if told in _TEXT_LIKE:
            (enc,), _ = encoders([own], [0])
            out_encs[i], out_fmts[i] = enc, 0
        else:
            (enc,), (fmt,) = encoders([told], [fmts[i]])
            out_oids[i], out_encs[i], out_fmts[i] = told, enc, fmt
    return out_oids, out_encs, out_fmts


def encoders(oids: Sequence[int], formats: Sequence[int]) -> tuple[list[Encoder], list[int]]:
    """Per-column encoders and the format codes actually used (binary where we can write it)."""
    fmts = [fmt_of(formats, i) for i in range(len(oids))]
    fmts = [f if (f == 0 or oid in t.BINARY_OUT) else 0 for f, oid in zip(fmts, oids, strict=True)]
    encs: list[Encoder] = []
    for oid, f in zip(oids, fmts, strict=True):
        if f == 1:
            encs.append(lambda v, oid=oid: t.binary_value(v, oid))  # type: ignore[misc]
        elif oid in (t.JSONB, t.JSON):
            encs.append(t.text_json)
        elif oid in (t.TEXT, t.VARCHAR, t.NAME):
            encs.append(_text_str)
        elif oid in (t.INT8, t.INT4, t.INT2, t.OID):
            encs.append(_text_int)
        elif oid == t.FLOAT4:
            encs.append(_text_float4)
        elif oid in t.ARRAY_ELEMENTS:
            encs.append(_text_array)
        else:
            encs.append(_text_any)
    return encs, fmts


def fmt_of(formats: Sequence[int], i: int) -> int:
    """Format code of column/parameter ``i``: none given = text, one = for all, else one each."""
    if not formats:
        return 0
    if len(formats) == 1:
        return formats[0]
    return formats[i] if i < len(formats) else 0


def normalise_tag(res: Result, stmt: ast.Statement | None) -> str:
    status = res.status or ""
    words = status.split()
    if words and words[0] in ("INSERT", "UPSERT") and len(words) == 2:
        return f"INSERT 0 {words[1]}"
    if words and words[0] == "SHOW":
        return f"SELECT {len(res.rows)}" if res.columns else "SHOW"
    if status:
        return status
    if res.columns:
        return f"SELECT {len(res.rows)}"
    if stmt is not None:
        name = type(stmt).__name__
        return "".join(" " + c if c.isupper() else c for c in name).strip().upper()
    return "OK"


# ------------------------------------------------------------------------------ DataRow batches
#: Below this many rows the per-row path is cheaper than setting up Arrow arrays.
VECTOR_MIN_ROWS = 256


def data_rows(
    rows: Sequence[tuple[Any, ...]], encs: Sequence[Encoder], oids: Sequence[int], fmts: Sequence[int]
) -> bytes:
    """The DataRow messages of ``rows``, back to back.

    Large groups are built column-wise with Arrow: each column becomes one binary array (integers
    and text converted by Arrow kernels, other types through their encoder), lengths and row
    headers are packed with numpy, and ``binary_join_element_wise`` lays every row's pieces end to
    end, so the joined array's data buffer *is* the wire bytes."""
    if len(rows) >= VECTOR_MIN_ROWS:
        try:
            return _data_rows_arrow(rows, encs, oids, fmts)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            pass  # a value Arrow does not take as the column's type (e.g. mixed types): per row
    return b"".join(
        data_row([None if v is None else enc(v) for enc, v in zip(encs, r, strict=False)]) for r in rows
    )


def _data_rows_arrow(
    rows: Sequence[tuple[Any, ...]], encs: Sequence[Encoder], oids: Sequence[int], fmts: Sequence[int]
) -> bytes:
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = list(zip(*rows, strict=True)) if encs else []
    arrays: list[pa.Array] = []
    for i, enc in enumerate(encs):
        col = columns[i]
        if fmts[i] == 0 and oids[i] in (t.INT8, t.INT4, t.INT2, t.OID):
            arrays.append(pc.cast(pa.array(col, pa.int64()), pa.string()).cast(pa.binary()))
        elif fmts[i] == 0 and oids[i] in (t.TEXT, t.VARCHAR, t.NAME):
            arrays.append(pa.array(col, pa.string()).cast(pa.binary()))
        else:
            arrays.append(pa.array([None if v is None else enc(v) for v in col], pa.binary()))
    return join_rows(arrays, len(rows))


def join_rows(arrays: Sequence[pa.Array], n: int) -> bytes:
    """DataRow messages for ``n`` rows whose columns are the binary ``arrays`` (null = SQL NULL):
    lengths and row headers are packed with numpy and ``binary_join_element_wise`` lays every
    row's pieces end to end, so the joined array's data buffer is the wire bytes."""
    import numpy as np
    import pyarrow.compute as pc

    sizes = np.full(n, 4 + 2, dtype=np.int64)  # the length word and the column count
    pieces: list[pa.Array] = []
    for arr in arrays:
        lengths = pc.binary_length(arr).fill_null(-1).to_numpy().astype(np.int64)
        sizes += 4 + np.maximum(lengths, 0)
        word = lengths.astype(">i4")
        pieces.append(_fixed(word, 4, n))
        pieces.append(arr.fill_null(b"") if arr.null_count else arr)
    head = np.zeros(n, dtype=[("tag", "S1"), ("size", ">i4"), ("width", ">i2")])
    head["tag"] = b"D"
    head["size"] = sizes
    head["width"] = len(arrays)
    joined = pc.binary_join_element_wise(_fixed(head, 7, n), *pieces, b"")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=n + 1, offset=joined.offset * 4)
    data = joined.buffers()[2]
    return bytes(memoryview(data)[offsets[0] : offsets[-1]])


def _fixed(packed: Any, width: int, n: int) -> pa.Array:
    import pyarrow as pa

    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(packed)]).cast(
        pa.binary()
    )


def hex_bytea(arr: pa.Array) -> pa.Array:
    """``bytea`` text output (``\\x`` then two hex digits a byte) of a binary array without nulls."""
    import numpy as np
    import pyarrow as pa

    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(
        np.int64
    )
    buf = arr.buffers()[2]
    body = (
        np.frombuffer(buf, dtype=np.uint8)[offs[0] : offs[-1]] if buf is not None else np.empty(0, np.uint8)
    )
    out_offs = 2 * (offs - offs[0]) + 2 * np.arange(n + 1, dtype=np.int64)
    out = np.empty(int(out_offs[-1]), dtype=np.uint8)
    starts = out_offs[:-1]
    keep = np.ones(len(out), dtype=bool)
    keep[starts] = False
    keep[starts + 1] = False
    out[starts] = ord("\\")
    out[starts + 1] = ord("x")
    out[keep] = _hex_lut()[body].reshape(-1)
    return pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(out_offs), pa.py_buffer(out)]
    ).cast(pa.binary())


@functools.cache
def _hex_lut() -> Any:
    """Row ``b`` holds the two lower-case hex digits of byte ``b``."""
    import numpy as np

    return np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), dtype=np.uint8).reshape(256, 2)
