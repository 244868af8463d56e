"""A core changefeed on the command line: CSV as CockroachDB's SQL shell prints it.

The header ``table,key,value``, then one row per message as it commits, flushed at once, with
minimal CSV quoting: ``cdc_test,[0],"{""after"": {""a"": 0}}"``. A key or value that is not
printable UTF-8 (Avro's binary framing) prints byte by byte as ``\\ooo`` octal escapes:
``\\000\\000\\000\\000\\001\\002\\000``. Resolved messages have an empty table and key.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

from changefeed.feeds.core import Message

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


def write_csv(messages: Iterable[Message], out: TextIO) -> int:
    """Write the header and every message; returns the number of messages written."""
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(HEADER)
    out.flush()
    n = 0
    for table, key, value in messages:
        writer.writerow((table or "", field_text(key), field_text(value)))
        out.flush()
        n += 1
    return n


__all__ = ["HEADER", "field_text", "write_csv"]
