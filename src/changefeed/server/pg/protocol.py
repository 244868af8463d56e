"""PostgreSQL frontend/backend protocol 3.0: message framing, reading and building messages.

Every message after the startup packet is one type byte, a big-endian int32 length that counts
itself, and a body. Bodies are built with :class:`Writer` and read with :class:`Reader`; both
are byte-level only, with no knowledge of sessions or SQL.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable

from changefeed.exceptions import ChangefeedError

#: Largest message a client may send (PostgreSQL's own limit for a query is 1 GiB; ours is smaller).
MAX_MESSAGE = 64 * 1024 * 1024

PROTOCOL_3_0 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102


class ProtocolViolation(ChangefeedError):
    """The client broke the protocol (bad framing, truncated or oversized message)."""

    code = "08P01"


class Reader:
    """Reads fields from one message body; running off the end is a protocol violation."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("invalid message format: truncated message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        v: int = struct.unpack("!h", self._take(2))[0]
        return v

    def int32(self) -> int:
        v: int = struct.unpack("!i", self._take(4))[0]
        return v

    def uint32(self) -> int:
        v: int = struct.unpack("!I", self._take(4))[0]
        return v

    def byte(self) -> bytes:
        return self._take(1)

    def bytes_(self, n: int) -> bytes:
        return self._take(n)

    def cstr(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation("invalid message format: unterminated string")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("invalid byte sequence for encoding UTF8") from None

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolViolation("invalid message format: unexpected bytes at the end of a message")


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, Reader]:
    """The startup-phase packet: (code, body) where code is a protocol version or request code."""
    head = await reader.readexactly(4)
    (length,) = struct.unpack("!i", head)
    if length < 8 or length > 10_000:
        raise ProtocolViolation(f"invalid length of startup packet: {length}")
    body = await reader.readexactly(length - 4)
    r = Reader(body)
    return r.int32(), r


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, Reader]:
    """One regular message: (type byte, body reader)."""
    head = await reader.readexactly(5)
    kind = head[:1]
    (length,) = struct.unpack("!i", head[1:])
    if length < 4:
        raise ProtocolViolation(f"invalid message length {length} for message type {kind!r}")
    if length - 4 > MAX_MESSAGE:
        raise ProtocolViolation(f"message of {length} bytes exceeds the limit of {MAX_MESSAGE} bytes")
    body = await reader.readexactly(length - 4)
    return kind, Reader(body)


_H = struct.Struct("!h")
_I = struct.Struct("!i")


#: The client went away (or stopped reading): the session ends; any other exception a statement
#: raises is that statement's error, sent with its SQLSTATE (``session.error_of``: XX000 for a bug).
CLIENT_GONE = (ConnectionError, asyncio.IncompleteReadError, TimeoutError)


class MessageStream:
    """The regular messages of one connection, read through one buffer: a client that pipelines
    (psycopg's ``executemany``, JDBC batches) sends many messages per segment, and the session can
    see with :meth:`next_kind` which have arrived whole and take them with :meth:`take` without
    a read per message."""

    __slots__ = ("buf", "pos", "reader")

    #: Bytes asked of the socket per read.
    CHUNK = 256 * 1024

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buf = b""
        self.pos = 0

    def _length(self) -> int:
        """The whole length (type byte included) of the next message if it has arrived, else 0."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos < 5:
            return 0
        (length,) = _I.unpack_from(buf, pos + 1)
        if length < 4:
            raise ProtocolViolation(
                f"invalid message length {length} for message type {buf[pos : pos + 1]!r}"
            )
        if length - 4 > MAX_MESSAGE:
            raise ProtocolViolation(f"message of {length} bytes exceeds the limit of {MAX_MESSAGE} bytes")
        return length + 1 if len(buf) - pos >= length + 1 else 0

    def has_message(self) -> bool:
        """Whether the next message has arrived whole."""
        return bool(self._length())

    def peek(self) -> tuple[bytes, bytes] | None:
        """The next message, (type byte, body), if it has arrived whole; it stays next."""
        n = self._length()
        if not n:
            return None
        pos = self.pos
        return self.buf[pos : pos + 1], self.buf[pos + 5 : pos + n]

    def executes_before_sync(self, limit: int = 2) -> tuple[int, bool]:
        """How many Execute messages have arrived whole before the next Sync (counted up to
        ``limit``), and whether that Sync has arrived."""
        buf, pos, n = self.buf, self.pos, 0
        while n < limit and len(buf) - pos >= 5:
            kind = buf[pos : pos + 1]
            if kind == b"S":
                return n, True
            (length,) = _I.unpack_from(buf, pos + 1)
            if length < 4 or len(buf) - pos < length + 1:
                break
            n += kind == b"E"
            pos += length + 1
        return n, False

    def advance(self) -> None:
        """Drop the message :meth:`peek` returned (it is whole: its length field is right)."""
        (length,) = _I.unpack_from(self.buf, self.pos + 1)
        self.pos += length + 1

    def take(self) -> tuple[bytes, bytes]:
        """The next message, which has arrived whole: (type byte, body)."""
        n = self._length()
        pos = self.pos
        self.pos = pos + n
        return self.buf[pos : pos + 1], self.buf[pos + 5 : pos + n]

    async def read(self) -> tuple[bytes, Reader]:
        """The next message, reading from the socket as needed."""
        n = self._length()
        if n:  # already here (the common case in a pipeline): one length check, one slice each
            buf, pos = self.buf, self.pos
            self.pos = pos + n
            return buf[pos : pos + 1], Reader(buf[pos + 5 : pos + n])
        while not self._length():
            have = len(self.buf) - self.pos
            if have < 5:
                need = 5 - have
            else:
                need = int.from_bytes(self.buf[self.pos + 1 : self.pos + 5], "big", signed=True) + 1 - have
            chunks = [self.buf[self.pos :]]
            while need > 0:  # one join per message however many reads it takes
                chunk = await self.reader.read(max(self.CHUNK, need))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"".join(chunks), None)
                chunks.append(chunk)
                need -= len(chunk)
            self.buf = b"".join(chunks)
            self.pos = 0
        kind, body = self.take()
        return kind, Reader(body)


def parse_bind(body: bytes) -> tuple[str, str, tuple[int, ...], list[bytes | None], tuple[int, ...]]:
    """A Bind body: (portal, statement, parameter formats, parameter values, result formats)."""
    try:
        z1 = body.index(0)
        z2 = body.index(0, z1 + 1)
        portal, stmt = body[:z1].decode(), body[z1 + 1 : z2].decode()
        off = z2 + 1
        (nf,) = _H.unpack_from(body, off)
        pf = struct.unpack_from(f"!{max(nf, 0)}h", body, off + 2)
        off += 2 + 2 * max(nf, 0)
        (n,) = _H.unpack_from(body, off)
        off += 2
        raw: list[bytes | None] = []
        for _ in range(max(n, 0)):
            (ln,) = _I.unpack_from(body, off)
            off += 4
            if ln < 0:
                raw.append(None)
            else:
                if off + ln > len(body):
                    raise ProtocolViolation("invalid message format: truncated message")
                raw.append(body[off : off + ln])
                off += ln
        (nr,) = _H.unpack_from(body, off)
        rf = struct.unpack_from(f"!{max(nr, 0)}h", body, off + 2)
        off += 2 + 2 * max(nr, 0)
    except (ValueError, struct.error):
        raise ProtocolViolation("invalid message format: truncated message") from None
    except UnicodeDecodeError:
        raise ProtocolViolation("invalid byte sequence for encoding UTF8") from None
    if off != len(body):
        raise ProtocolViolation("invalid message format: unexpected bytes at the end of a message")
    return portal, stmt, pf, raw, rf


# ----------------------------------------------------------------------------- backend messages
def auth_ok() -> bytes:
    return message(b"R", struct.pack("!i", 0))


def auth_sasl(mechanisms: Iterable[str]) -> bytes:
    return message(b"R", struct.pack("!i", 10) + b"".join(cstr(m) for m in mechanisms) + b"\x00")


def auth_sasl_continue(data: bytes) -> bytes:
    return message(b"R", struct.pack("!i", 11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return message(b"R", struct.pack("!i", 12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!iI", pid, secret))


def ready_for_query(status: bytes) -> bytes:
    return message(b"Z", status)


def negotiate_protocol_version(minor: int, unknown: list[str]) -> bytes:
    return message(b"v", struct.pack("!ii", minor, len(unknown)) + b"".join(cstr(u) for u in unknown))


def copy_response(kind: bytes, binary: bool, columns: int) -> bytes:
    """CopyInResponse (``G``) or CopyOutResponse (``H``): the overall format and each column's."""
    fmt = 1 if binary else 0
    return message(kind, struct.pack(f"!bh{columns}h", fmt, columns, *([fmt] * columns)))


def error_response(
    code: str,
    text: str,
    *,
    severity: str = "ERROR",
    hint: str | None = None,
    context: str | None = None,
    detail: str | None = None,
    constraint: str | None = None,
) -> bytes:
    fields = [b"S" + cstr(severity), b"V" + cstr(severity), b"C" + cstr(code), b"M" + cstr(text)]
    if detail:
        fields.append(b"D" + cstr(detail))
    if constraint:
        fields.append(b"n" + cstr(constraint))
    if hint:
        fields.append(b"H" + cstr(hint))
    if context:
        fields.append(b"W" + cstr(context))
    return message(b"E", b"".join(fields) + b"\x00")


def notice_response(code: str, text: str, severity: str = "NOTICE") -> bytes:
    body = b"S" + cstr(severity) + b"V" + cstr(severity) + b"C" + cstr(code) + b"M" + cstr(text) + b"\x00"
    return message(b"N", body)


def row_description(fields: list[tuple[str, int, int]]) -> bytes:
    """``fields``: (name, type OID, format code) per column."""
    from changefeed.server.pg.types import TYPE_LENGTHS

    parts = [struct.pack("!h", len(fields))]
    for name, oid, fmt in fields:
        parts.append(cstr(name) + struct.pack("!ihihih", 0, 0, oid, TYPE_LENGTHS.get(oid, -1), -1, fmt))
    return message(b"T", b"".join(parts))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack("!i", len(v)))
            parts.append(v)
    body = b"".join(parts)
    return b"D" + struct.pack("!i", len(body) + 4) + body


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def parameter_description(oids: list[int]) -> bytes:
    return message(b"t", struct.pack(f"!h{len(oids)}i", len(oids), *oids))


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")
COPY_DONE = message(b"c")
