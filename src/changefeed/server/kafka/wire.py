"""Kafka wire primitives.

Big-endian fixed-width integers, ``int16``-length strings, ``int32``-length bytes and arrays,
as the Kafka protocol guide defines them; and, for the flexible versions of the APIs that have
them here, unsigned varints, compact strings, bytes and arrays (length + 1 as a varint, 0 for
null) and tagged fields (skipped on read, none written). :func:`reader_for` and
:func:`writer_for` give one API both ways: their ``string``, ``array``, ... are compact in a
flexible version, and ``tags()`` (the end of every structure) reads or writes its tagged fields
there and nothing in other versions. :class:`Reader` raises :class:`MalformedRequest` on any
read past the end of a request, so truncated input never reaches a handler half-parsed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = [
    "FlexibleReader",
    "FlexibleWriter",
    "MalformedRequest",
    "Reader",
    "Writer",
    "reader_for",
    "writer_for",
]

T = TypeVar("T")

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_U8 = struct.Struct(">B")


class MalformedRequest(Exception):
    """The request's bytes do not parse as the version its header names."""


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _take(self, st: struct.Struct) -> int:
        try:
            (v,) = st.unpack_from(self.data, self.pos)
        except struct.error:
            raise MalformedRequest(f"truncated request at byte {self.pos}") from None
        self.pos += st.size
        return int(v)

    def int8(self) -> int:
        return self._take(_I8)

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def boolean(self) -> bool:
        return self._take(_I8) != 0

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedRequest(f"truncated request: {n} bytes wanted at byte {self.pos}")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedRequest(f"string at byte {self.pos - n} is not UTF-8") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise MalformedRequest(f"null string at byte {self.pos - 2} where one is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else self.raw(n)

    def bytes_(self) -> bytes:
        return self.nullable_bytes() or b""

    def array(self, item: Callable[[Reader], T]) -> list[T]:
        n = self.int32()
        if n == -1:
            return []
        if n < 0 or n > len(self.data) - self.pos:  # every element takes at least a byte
            raise MalformedRequest(f"array length {n} at byte {self.pos - 4} exceeds the request")
        return [item(self) for _ in range(n)]

    def nullable_array(self, item: Callable[[Reader], T]) -> list[T] | None:
        n = self.int32()
        if n == -1:
            return None
        self.pos -= 4
        return self.array(item)

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def tags(self) -> None:
        """The end of a structure: nothing to read in a non-flexible version."""

    # -- flexible versions -------------------------------------------------------------------

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self._take(_U8)
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise MalformedRequest(f"varint too long at byte {self.pos}")

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedRequest(f"string at byte {self.pos - n} is not UTF-8") from None

    def compact_string(self) -> str:
        s = self.compact_nullable_string()
        if s is None:
            raise MalformedRequest(f"null string at byte {self.pos - 1} where one is required")
        return s

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        return b"" if n < 0 else self.raw(n)

    def compact_array(self, item: Callable[[Reader], T]) -> list[T]:
        n = self.uvarint() - 1
        if n < 0:
            return []
        if n > len(self.data) - self.pos:
            raise MalformedRequest(f"array length {n} at byte {self.pos} exceeds the request")
        return [item(self) for _ in range(n)]

    def tagged_fields(self) -> None:
        """Skip a tagged-field section (no tagged field is used by this endpoint)."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


class Writer:
    __slots__ = ("buf", "parts")

    #: Byte strings at least this long are kept by reference, not copied into the buffer.
    BIG = 1 << 16

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[bytes | bytearray | memoryview] = []

    def int8(self, v: int) -> Writer:
        self.buf += _I8.pack(v)
        return self

    def int16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def uint32(self, v: int) -> Writer:
        self.buf += _U32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def boolean(self, v: bool) -> Writer:
        self.buf.append(1 if v else 0)
        return self

    def string(self, s: str | None) -> Writer:
        if s is None:
            return self.int16(-1)
        b = s.encode("utf-8")
        self.int16(len(b))
        self.buf += b
        return self

    def bytes_(self, b: bytes | bytearray | memoryview | None) -> Writer:
        if b is None:
            return self.int32(-1)
        self.int32(len(b))
        if len(b) >= self.BIG:
            self.parts.append(self.buf)
            self.parts.append(b)
            self.buf = bytearray()
        else:
            self.buf += b
        return self

    def raw(self, b: bytes | bytearray | memoryview) -> Writer:
        self.buf += b
        return self

    def tags(self) -> Writer:
        """The end of a structure: nothing to write in a non-flexible version."""
        return self

    def bytes_parts(self, parts: Sequence[bytes]) -> Writer:
        """:meth:`bytes_` of the parts joined, without joining them: big parts are kept by
        reference (a Fetch's stored record batches go to the socket as they were read)."""
        self.int32(sum(map(len, parts)))
        for b in parts:
            if len(b) >= self.BIG:
                self.parts.append(self.buf)
                self.parts.append(b)
                self.buf = bytearray()
            else:
                self.buf += b
        return self

    def array(self, items: list[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            return self.int32(-1)
        self.int32(len(items))
        for it in items:
            write(self, it)
        return self

    # -- flexible versions -------------------------------------------------------------------

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def compact_string(self, s: str | None) -> Writer:
        if s is None:
            return self.uvarint(0)
        b = s.encode("utf-8")
        self.uvarint(len(b) + 1)
        self.buf += b
        return self

    def compact_bytes(self, b: bytes | None) -> Writer:
        if b is None:
            return self.uvarint(0)
        self.uvarint(len(b) + 1)
        self.buf += b
        return self

    def compact_array(self, items: list[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            return self.uvarint(0)
        self.uvarint(len(items) + 1)
        for it in items:
            write(self, it)
        return self

    def tagged_fields(self) -> Writer:
        """An empty tagged-field section."""
        self.buf.append(0)
        return self

    def getparts(self) -> list[bytes | bytearray | memoryview]:
        """What :meth:`getvalue` joins, not joined (for ``writelines``)."""
        return [*self.parts, self.buf] if self.parts else [bytes(self.buf)]

    def getvalue(self) -> bytes:
        if not self.parts:
            return bytes(self.buf)
        return b"".join([*self.parts, self.buf])


class FlexibleReader(Reader):
    """A :class:`Reader` of a flexible version: strings, bytes and arrays are compact, and
    :meth:`tags` skips the tagged fields that end every structure."""

    __slots__ = ()

    def nullable_string(self) -> str | None:
        return self.compact_nullable_string()

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n)

    def array(self, item: Callable[[Reader], T]) -> list[T]:
        return self.compact_array(item)

    def nullable_array(self, item: Callable[[Reader], T]) -> list[T] | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        if n > len(self.data) - self.pos:
            raise MalformedRequest(f"array length {n} at byte {self.pos} exceeds the request")
        return [item(self) for _ in range(n)]

    def tags(self) -> None:
        self.tagged_fields()


class FlexibleWriter(Writer):
    """A :class:`Writer` of a flexible version: strings, bytes and arrays are compact, and
    :meth:`tags` writes the (empty) tagged fields that end every structure."""

    __slots__ = ()

    def string(self, s: str | None) -> Writer:
        return self.compact_string(s)

    def bytes_(self, b: bytes | bytearray | memoryview | None) -> Writer:
        return self.compact_bytes(None if b is None else bytes(b))

    def array(self, items: list[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        return self.compact_array(items, write)

    def tags(self) -> Writer:
        return self.tagged_fields()


def reader_for(r: Reader, flexible: bool) -> Reader:
    """``r`` from where it stands, as the reader of a flexible version or not."""
    return FlexibleReader(r.data, r.pos) if flexible else r


def writer_for(flexible: bool) -> Writer:
    """A new writer for a flexible version or not."""
    return FlexibleWriter() if flexible else Writer()
