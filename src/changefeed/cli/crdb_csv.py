"""A core changefeed on the command line: CSV as CockroachDB's SQL shell prints it.

The header ``table,key,value``, then one row per message as it commits, flushed at once, with
minimal CSV quoting: ``cdc_test,[0],"{""after"": {""a"": 0}}"``. A key or value that is not
printable UTF-8 (Avro's binary framing) prints byte by byte as ``\\ooo`` octal escapes:
``\\000\\000\\000\\000\\001\\002\\000``. Resolved messages have an empty table and key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

from changefeed.pipeline.sinkless import Chunk

if TYPE_CHECKING:
    import pyarrow as pa

HEADER = ("table", "key", "value")


def field_text(data: bytes | None) -> str:
    """A key or value as the shell shows it."""
    if data is None:
        return ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        return text
    return "".join(f"\\{b:03o}" for b in data)


def csv_field(text: str) -> str:
    """Minimal CSV quoting (Python's and Go's writers agree for these fields)."""
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_lines(chunk: Chunk) -> str:
    """The CSV lines of a group of messages, computed column-wise with Arrow string kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(chunk.values)
    if n == 0:
        return ""
    try:
        table = csv_field(chunk.table or "")
        keys = _arrow_field(chunk.keys) if chunk.keys is not None else ""
        values = _arrow_field(chunk.values)
    except _NotPrintable:
        return "".join(
            ",".join((csv_field(t or ""), csv_field(field_text(k)), csv_field(field_text(v)))) + "\n"
            for t, k, v in chunk.messages()
        )
    lines = pc.binary_join_element_wise(pa.repeat(pa.scalar(table), n), keys, values, ",")
    # each line with its newline, then the whole text straight from the array's data buffer
    ended = pc.binary_join_element_wise(lines, pa.repeat(pa.scalar(""), n), "\n").cast(pa.large_string())
    offsets = ended.buffers()[1]
    data = ended.buffers()[2]
    if offsets is None or data is None:
        return "\n".join(lines.to_pylist()) + "\n"
    bounds = memoryview(offsets).cast("q")
    start, end = bounds[ended.offset], bounds[ended.offset + n]
    return str(memoryview(data)[start:end], "utf-8")


class _NotPrintable(Exception):
    pass


def _arrow_field(raw: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = raw.fill_null(b"").cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8
        raise _NotPrintable() from None
    printable = pc.or_(pc.utf8_is_printable(text), pc.equal(pc.utf8_length(text), 0))
    if not pc.all(printable).as_py():
        raise _NotPrintable()
    quote = pc.match_substring_regex(text, '[,"\r\n]')
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    return pc.if_else(quote, quoted, text)


def write_csv(batches: Iterable[Chunk], out: TextIO) -> int:
    """Write the header, then each group of messages at once, flushed after it; returns the
    number of messages written."""
    out.write(",".join(HEADER) + "\n")
    out.flush()
    n = 0
    for batch in batches:
        out.write(csv_lines(batch))
        out.flush()
        n += len(batch.values)
    return n


__all__ = ["HEADER", "csv_field", "csv_lines", "field_text", "write_csv"]
