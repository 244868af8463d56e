"""COPY's three data formats, both ways: rows read from the CopyData a client sends and rows
written as the CopyData it reads.

* **text**: a row a line, fields split at the delimiter (tab), the NULL string (``\\N``) as is
  for NULL, backslash escapes (``\\t``, ``\\n``, ``\\\\``, octal and ``\\x`` hex) inside fields,
  ``\\.`` alone on a line ends the data. A line without a backslash is split in one call.
* **csv**: RFC 4180 with PostgreSQL's rules (a quoted field may hold delimiters and newlines; an
  unquoted field equal to the NULL string is NULL, a quoted one never is), parsed by Arrow's CSV
  reader a chunk of whole records at a time.
* **binary**: the ``PGCOPY\\n\\377\\r\\n\\0`` signature, flags and header extension, then per row
  a field count and length-prefixed fields in each type's binary form, and a -1 trailer.

A reader is fed the CopyData as it arrives and hands out the rows of whole lines (records) so
far, as columns of the row's raw values (text: ``str``; binary: ``bytes``; NULL: None), with
the input line of its first row; ``final`` takes the rest at CopyDone. Errors are
``BadCopyFormat`` (22P04) with PostgreSQL's words and its context (``COPY t, line 3``).
"""

from __future__ import annotations

import csv
import io
import re
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from changefeed.exceptions import BadCopyFormat, ChangefeedError, CharacterNotInRepertoire
from changefeed.server.pg.copy_spec import CopySpec

__all__ = ["SIGNATURE", "RowReader", "binary_row", "csv_row", "reader_for", "text_row"]

#: The first bytes of COPY's binary format.
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_HEADER = struct.Struct("!ii")
_I = struct.Struct("!i")
_H = struct.Struct("!h")
#: Text-format escapes (a backslash and what follows) and what they stand for: octal and hex
#: escapes are bytes, the field's bytes then read as UTF-8 (as PostgreSQL reads them).
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|(.))", re.S)
_SIMPLE = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}


def _unescape(m: re.Match[bytes]) -> bytes:
    octal, hexa, other = m.groups()
    if octal is not None:
        return bytes([int(octal, 8) & 0xFF])
    if hexa is not None:
        return bytes([int(hexa, 16)])
    return _SIMPLE.get(other, other)


class RowReader(ABC):
    """Rows of one format from a stream of CopyData."""

    def __init__(self, spec: CopySpec, names: Sequence[str]) -> None:
        self.spec = spec
        self.names = list(names)
        self.width = len(names)
        self.buf = bytearray()
        self.line = 1  # the input line of the next row
        self.ended = False  # the data said it ends (text's \., binary's trailer)
        self.fresh_newline = False  # a newline fed since the last take

    def feed(self, data: bytes) -> None:
        if not self.ended:
            self.buf += data
            if b"\n" in data:
                self.fresh_newline = True

    def ready(self) -> bool:
        """Whether what was fed since the last :meth:`take` may complete a row (a text or CSV
        row ends with a newline: until one arrives, a long value is not looked at again)."""
        return self.fresh_newline

    @abstractmethod
    def take(self, final: bool) -> tuple[list[list[Any]], int, int]:
        """The columns of the whole rows fed so far (all of them when ``final``), how many, and
        the input line of the first."""

    def nothing(self, line: int) -> tuple[list[list[Any]], int, int]:
        """What :meth:`take` gives when no row is whole yet."""
        return [[] for _ in range(self.width)], 0, line

    def shape_error(self, fields: int, line: int, raw: str | None = None) -> BadCopyFormat:
        """The error of a row of ``fields`` fields where :attr:`width` are due."""
        if fields < self.width:
            return self.error(f'missing data for column "{self.names[fields]}"', line, raw)
        return self.error("extra data after last expected column", line, raw)

    def utf8_error(self, data: bytes, at: int, line: int) -> ChangefeedError:
        err = CharacterNotInRepertoire(f'invalid byte sequence for encoding "UTF8": 0x{data[at]:02x}')
        err.context = f"{self.spec.target}, line {line}"
        return err

    def error(self, message: str, line: int, raw: str | None = None) -> BadCopyFormat:
        err = BadCopyFormat(message)
        err.context = f"{self.spec.target}, line {line}" + (f': "{raw[:80]}"' if raw is not None else "")
        return err


def _utf8(chunk: bytes, reader: RowReader) -> str:
    try:
        return chunk.decode()
    except UnicodeDecodeError as exc:
        raise reader.utf8_error(chunk, exc.start, reader.line + chunk.count(b"\n", 0, exc.start)) from None


def _escaped(data: bytes | bytearray | str, i: int) -> bool:
    """Whether the character at ``i`` follows an odd number of backslashes (is escaped)."""
    k = i
    while k > 0 and data[k - 1] in (0x5C, "\\"):
        k -= 1
    return (i - k) % 2 == 1


class TextRows(RowReader):
    """The text format. A backslash before a newline makes the newline data (the row goes on, as
    in PostgreSQL). The first line's end (``\\n`` or ``\\r\\n``) is every line's: a carriage
    return elsewhere must be escaped."""

    def __init__(self, spec: CopySpec, names: Sequence[str]) -> None:
        super().__init__(spec, names)
        self.crlf: bool | None = None  # lines end with \r\n; None: no line seen yet

    def _cut(self) -> int:
        end = self.buf.rfind(b"\n") + 1
        while end > 0 and _escaped(self.buf, end - 1):
            end = self.buf.rfind(b"\n", 0, end - 1) + 1
        return end

    def take(self, final: bool) -> tuple[list[list[Any]], int, int]:
        self.fresh_newline = False
        end = len(self.buf) if final else self._cut()
        first = self.line
        if end <= 0:
            return self.nothing(first)
        text = _utf8(bytes(self.buf[:end]), self)
        del self.buf[:end]
        delim, null, width = self.spec.delimiter, self.spec.null, self.width
        if "\\" not in text and "\r" not in text and not self.crlf:
            fast = self._split_all(text)
            if fast is not None:
                return fast
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        cols: list[list[Any]] = [[] for _ in range(width)]
        rows = 0
        at = 0
        while at < len(lines):
            raw = lines[at]
            at += 1
            line = self.line
            self.line += 1
            while at < len(lines) and raw and _escaped(raw, len(raw)):  # an escaped newline: data
                raw += "\n" + lines[at]
                at += 1
                self.line += 1
            if self.crlf is None:
                self.crlf = raw.endswith("\r") and not _escaped(raw, len(raw) - 1)
            if self.crlf:
                if not raw.endswith("\r"):
                    raise self.error("literal newline found in data", line, raw)
                raw = raw[:-1]
            cr = raw.find("\r")
            while cr >= 0:
                if not _escaped(raw, cr):
                    raise self.error("literal carriage return found in data", line, raw)
                cr = raw.find("\r", cr + 1)
            if raw == "\\.":
                self.ended = True
                self.buf.clear()
                break
            if self.spec.header and line == 1:
                continue
            if "\\" in raw:
                fields = [self._field(f, line) for f in _split_escaped(raw, delim)]
            else:
                fields = [None if f == null else f for f in raw.split(delim)]
            if len(fields) != width:
                raise self.shape_error(len(fields), line, raw)
            for col, v in zip(cols, fields, strict=True):
                col.append(v)
            if rows == 0:
                first = line
            rows += 1
        return cols, rows, first

    def _split_all(self, text: str) -> tuple[list[list[Any]], int, int] | None:
        """Lines without escapes or carriage returns, split in two calls: every field of every
        line in one list, each column a slice of it. None when a line has another field count
        (the line-by-line path names it)."""
        first = self.line
        if text.endswith("\n"):
            text = text[:-1]
        rows = text.count("\n") + 1
        if self.spec.header and first == 1:
            _, _, text = text.partition("\n")
            rows -= 1
            first += 1
        if rows <= 0:
            self.line = first
            return self.nothing(first)
        delim, width = self.spec.delimiter, self.width
        if width > 1 and any(line.count(delim) != width - 1 for line in text.split("\n")):
            return None  # a line of another shape: the line-by-line path names it
        fields = text.replace("\n", delim).split(delim)
        if len(fields) != rows * width:
            return None
        null = self.spec.null
        if self.crlf is None:
            self.crlf = False  # these lines end with \n alone
        cols: list[list[Any]] = [fields[i::width] for i in range(width)]
        if null in fields:
            cols = [[None if v == null else v for v in col] if null in col else col for col in cols]
        self.line = first + rows
        return cols, rows, first

    def _field(self, raw: str, line: int) -> str | None:
        if raw == self.spec.null:
            return None  # the NULL string is matched before the escapes are undone
        if "\\" not in raw:
            return raw
        data = _ESCAPE.sub(_unescape, raw.encode())
        if b"\x00" in data:
            raise self.utf8_error(data, data.index(b"\x00"), line)
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise self.utf8_error(data, exc.start, line) from None


def _after(newline: int) -> int:
    """The start of the line after the newline at ``newline`` (-1: none found)."""
    return newline + 1 if newline >= 0 else -1


def _split_escaped(line: str, delim: str) -> list[str]:
    """``line`` split at the delimiters that no backslash escapes, fields still escaped."""
    out: list[str] = []
    start = i = 0
    while True:
        d = line.find(delim, i)
        b = line.find("\\", i)
        if b >= 0 and (d < 0 or b < d):
            i = b + 2
            continue
        if d < 0:
            out.append(line[start:])
            return out
        out.append(line[start:d])
        start = i = d + 1


class CsvRows(RowReader):
    """CSV through Arrow's reader: whole records only, cut at a newline outside quotes (an even
    number of quote characters before it: the escape is the quote, see ``copy_spec``). A line
    ``\\.`` outside quotes ends the data, as in PostgreSQL (psql sends it after inline data)."""

    def take(self, final: bool) -> tuple[list[list[Any]], int, int]:
        self.fresh_newline = False
        end = len(self.buf) if final else self._cut()
        marker = self._marker(end)
        if marker >= 0:
            end = marker
            self.ended = True
        first = self.line
        if end <= 0:
            return self.nothing(first)
        chunk = bytes(self.buf[:end])
        del self.buf[: len(self.buf) if self.ended else end]
        skip = 1 if self.spec.header and self.line == 1 else 0
        first += skip
        if not chunk.strip(b"\r\n"):
            return self.nothing(first)
        try:
            table = self._parse(chunk, skip)
        except (pa.ArrowInvalid, ValueError) as exc:
            raise self._locate(chunk, skip, exc) from None
        rows = table.num_rows
        self.line += skip + rows
        cols = [table.column(i).to_pylist() for i in range(self.width)]
        return cols, rows, first

    def _cut(self) -> int:
        buf, q = self.buf, self.spec.quote.encode()
        end = buf.rfind(b"\n") + 1
        quotes = buf.count(q, 0, end)  # counted once; each step back takes off its line's
        while end > 0 and quotes % 2:
            back = buf.rfind(b"\n", 0, end - 1) + 1
            quotes -= buf.count(q, back, end)
            end = back
        return end

    def _marker(self, end: int) -> int:
        """Where a ``\\.`` line outside quotes starts within the first ``end`` bytes (a last line
        without its newline counts when ``end`` is the whole buffer), or -1."""
        buf, q = self.buf, self.spec.quote.encode()
        at = 0 if buf.startswith(b"\\.") else _after(buf.find(b"\n\\."))
        while 0 <= at < end:
            after = buf[at + 2 : at + 4]
            whole = after[:1] == b"\n" or after == b"\r\n" or at + 2 == len(buf) == end
            if whole and buf.count(q, 0, at) % 2 == 0:
                return at
            at = _after(buf.find(b"\n\\.", at))
        return -1

    def _parse(self, chunk: bytes, skip: int) -> pa.Table:
        spec = self.spec
        names = [f"c{i}" for i in range(self.width)]
        return pacsv.read_csv(
            io.BytesIO(chunk),
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=skip, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=spec.delimiter,
                quote_char=spec.quote,
                double_quote=True,
                escape_char=False,
                newlines_in_values=True,
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                null_values=[spec.null],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )

    def _locate(self, chunk: bytes, skip: int, exc: Exception) -> ChangefeedError:
        """The record Arrow refused, found again with Python's CSV reader for its line."""
        spec = self.spec
        text = chunk.decode("utf-8", "replace")
        reader = csv.reader(
            io.StringIO(text, newline=""),
            delimiter=spec.delimiter,
            quotechar=spec.quote,
            doublequote=True,
            strict=True,
        )
        line = self.line
        try:
            for n, record in enumerate(reader):
                here = line + n
                if n < skip:
                    continue
                if len(record) != self.width:
                    return self.shape_error(len(record), here)
        except csv.Error:
            return self.error("unterminated CSV quoted field", line + max(reader.line_num - 1, 0))
        return self.error(f"malformed CSV data: {str(exc).splitlines()[0]}", line)


class BinaryRows(RowReader):
    """Rows of the binary format; a row's "line" is its number (PostgreSQL counts them so)."""

    def __init__(self, spec: CopySpec, names: Sequence[str]) -> None:
        super().__init__(spec, names)
        self.headed = False
        #: Bytes the buffer must hold before the row it ends with can be whole (a long value
        #: arriving over many CopyData is not parsed again for each).
        self.need = 0

    def feed(self, data: bytes) -> None:
        if self.ended and data:
            raise self.error("received copy data after EOF marker", self.line)
        super().feed(data)

    def ready(self) -> bool:
        return len(self.buf) >= self.need

    def take(self, final: bool) -> tuple[list[list[Any]], int, int]:
        buf, width = self.buf, self.width
        first = self.line
        cols: list[list[Any]] = [[] for _ in range(width)]
        if not final and len(buf) < self.need:
            return cols, 0, first
        pos = 0
        if not self.headed:
            if len(buf) < 19:
                if final:
                    raise self.error("COPY file signature not recognized", 1)
                return cols, 0, first
            if not buf.startswith(SIGNATURE):
                raise self.error("COPY file signature not recognized", 1)
            flags, ext = _HEADER.unpack_from(buf, 11)
            if flags & 0xFFFF0000:
                raise self.error("unrecognized critical flags in COPY file header", 1)
            if ext < 0:
                raise self.error("invalid COPY file header (wrong length)", 1)
            if len(buf) < 19 + ext:
                if final:
                    raise self.error("invalid COPY file header (wrong length)", 1)
                return cols, 0, first
            pos = 19 + ext
            self.headed = True
        data = bytes(buf)  # one copy; slices of it are the values
        unpack_h, unpack_i = _H.unpack_from, _I.unpack_from
        n = len(data)
        short = 0  # where the buffer must reach for the partial row at its end to be whole
        got: list[list[bytes | None]] = []
        while pos + 2 <= n and not self.ended:
            (count,) = unpack_h(data, pos)
            if count == -1:
                self.ended = True
                pos += 2
                break
            if count != width:
                raise self.error(f"row field count is {count}, expected {width}", self.line + len(got))
            at = pos + 2
            row: list[bytes | None] = []
            for _ in range(width):
                if at + 4 > n:
                    short = at + 4
                    break
                (size,) = unpack_i(data, at)
                at += 4
                if size < 0:
                    if size != -1:
                        raise self.error(f"invalid field size {size}", self.line + len(got))
                    row.append(None)
                    continue
                if at + size > n:
                    short = at + size
                    break
                row.append(data[at : at + size])
                at += size
            else:
                got.append(row)
                pos = at
                continue
            break  # the rest of the row is still on its way: at least up to ``short``
        rows = len(got)
        self.line += rows
        if rows:
            cols = [list(c) for c in zip(*got, strict=True)]
        if self.ended and pos < n:
            raise self.error("received copy data after EOF marker", self.line)
        del buf[:pos]
        self.need = max(short - pos, 0)
        if final and buf and not self.ended:
            raise self.error("unexpected EOF in COPY data", self.line)
        return cols, rows, first


def reader_for(spec: CopySpec, names: Sequence[str]) -> RowReader:
    """The reader of ``spec``'s format for rows of the columns ``names``."""
    kind: Callable[[CopySpec, Sequence[str]], RowReader] = {
        "text": TextRows,
        "csv": CsvRows,
        "binary": BinaryRows,
    }[spec.format]
    return kind(spec, names)


# ------------------------------------------------------------------------------------ writing
_TEXT_OUT = str.maketrans(
    {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v"}
)


def text_row(values: Sequence[str | None], spec: CopySpec) -> bytes:
    """One row in the text format: each value's text form escaped, NULLs as the NULL string."""
    delim = spec.delimiter
    out = []
    for v in values:
        if v is None:
            out.append(spec.null)
        else:
            e = v.translate(_TEXT_OUT)
            out.append(e.replace(delim, "\\" + delim) if delim not in "\\\n\r\t\b\f\v" and delim in e else e)
    return (delim.join(out) + "\n").encode()


def csv_row(values: Sequence[str | None], spec: CopySpec) -> bytes:
    """One row in CSV: a value quoted when it holds the delimiter, the quote, a newline or the
    escape, or reads as the NULL string (so that it comes back as itself, not as NULL)."""
    q, esc, delim = spec.quote, spec.escape, spec.delimiter
    out = []
    for v in values:
        if v is None:
            out.append(spec.null)
        elif v == spec.null or any(c in v for c in (delim, q, "\n", "\r", esc)) or v.startswith("\\."):
            body = v.replace(esc, esc + esc) if esc != q else v
            out.append(q + body.replace(q, esc + q) + q)
        else:
            out.append(v)
    return (delim.join(out) + "\n").encode()


def binary_row(values: Sequence[bytes | None]) -> bytes:
    """One row in the binary format: the field count, then each field length-prefixed."""
    parts = [_H.pack(len(values))]
    for v in values:
        parts.append(b"\xff\xff\xff\xff" if v is None else _I.pack(len(v)) + v)
    return b"".join(parts)
