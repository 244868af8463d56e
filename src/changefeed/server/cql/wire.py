"""The CQL native protocol's framing and primitive notations (native_protocol_v4.spec, §1-3).

A frame is a 9-byte header (version with the direction bit, flags, stream id, opcode, body length)
and a body made of the spec's notations: [int], [long], [short], [string], [long string],
[bytes], [short bytes], [value], [string map], [string multimap], [inet], [consistency].
:class:`Reader` raises :class:`ProtocolError` on a body that is short or malformed; the server
answers it with a protocol error and closes the connection.
"""

from __future__ import annotations

import builtins
import ipaddress
import struct
from collections.abc import Iterable, Mapping

import lz4.block

#: Protocol versions served. ScyllaDB serves v3 and v4 and answers a v5 request with a protocol
#: error naming the version, which makes drivers downgrade; so does this endpoint.
VERSIONS = (3, 4)
MAX_VERSION = 4
HEADER = struct.Struct(">BBhBi")
HEADER_SIZE = HEADER.size
#: Largest frame body accepted (ScyllaDB's native_transport_max_frame_size_in_mb is 256).
MAX_BODY = 256 * 1024 * 1024

# opcodes
ERROR = 0x00
STARTUP = 0x01
READY = 0x02
AUTHENTICATE = 0x03
OPTIONS = 0x05
SUPPORTED = 0x06
QUERY = 0x07
RESULT = 0x08
PREPARE = 0x09
EXECUTE = 0x0A
REGISTER = 0x0B
EVENT = 0x0C
BATCH = 0x0D
AUTH_CHALLENGE = 0x0E
AUTH_RESPONSE = 0x0F
AUTH_SUCCESS = 0x10

# header flags
FLAG_COMPRESSION = 0x01
FLAG_TRACING = 0x02
FLAG_CUSTOM_PAYLOAD = 0x04
FLAG_WARNING = 0x08

# error codes (§9)
SERVER_ERROR = 0x0000
PROTOCOL_ERROR = 0x000A
BAD_CREDENTIALS = 0x0100
UNAVAILABLE = 0x1000
OVERLOADED = 0x1001
IS_BOOTSTRAPPING = 0x1002
TRUNCATE_ERROR = 0x1003
WRITE_TIMEOUT = 0x1100
READ_TIMEOUT = 0x1200
SYNTAX_ERROR = 0x2000
UNAUTHORIZED = 0x2100
INVALID = 0x2200
CONFIG_ERROR = 0x2300
ALREADY_EXISTS = 0x2400
UNPREPARED = 0x2500

# RESULT kinds
VOID = 0x0001
ROWS = 0x0002
SET_KEYSPACE = 0x0003
PREPARED = 0x0004
SCHEMA_CHANGE = 0x0005

# query parameter flags
Q_VALUES = 0x01
Q_SKIP_METADATA = 0x02
Q_PAGE_SIZE = 0x04
Q_PAGING_STATE = 0x08
Q_SERIAL_CONSISTENCY = 0x10
Q_DEFAULT_TIMESTAMP = 0x20
Q_NAMES = 0x40

# rows metadata flags
M_GLOBAL_TABLES_SPEC = 0x0001
M_HAS_MORE_PAGES = 0x0002
M_NO_METADATA = 0x0004

#: A bound value that was left unset (protocol v4 ``[value]`` of length -2).
UNSET = object()

CONSISTENCIES = {
    0x0000: "ANY",
    0x0001: "ONE",
    0x0002: "TWO",
    0x0003: "THREE",
    0x0004: "QUORUM",
    0x0005: "ALL",
    0x0006: "LOCAL_QUORUM",
    0x0007: "EACH_QUORUM",
    0x0008: "SERIAL",
    0x0009: "LOCAL_SERIAL",
    0x000A: "LOCAL_ONE",
}

_I = struct.Struct(">i")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_Q = struct.Struct(">q")


#: OPTIONS' answer. The SCYLLA_* entries are how drivers tell a ScyllaDB node (one shard here, so
#: shard-aware drivers route every token to shard 0; no shard-aware port).
OPTIONS_ANSWER: dict[str, list[str]] = {
    "CQL_VERSION": ["3.3.1"],
    "COMPRESSION": ["lz4"],
    "PROTOCOL_VERSIONS": ["3/v3", "4/v4"],
    "SCYLLA_SHARD": ["0"],
    "SCYLLA_NR_SHARDS": ["1"],
    "SCYLLA_PARTITIONER": ["org.apache.cassandra.dht.Murmur3Partitioner"],
    "SCYLLA_SHARDING_ALGORITHM": ["biased-token-round-robin"],
    "SCYLLA_SHARDING_IGNORE_MSB": ["12"],
}


class CloseConnection(Exception):
    """End this connection (after its last answer was written)."""


class ProtocolError(Exception):
    """A frame or body that breaks the protocol: answered with code 0x000A, then the connection closes."""


class Reader:
    """Reads the notations of one frame body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("truncated frame body")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def byte(self) -> builtins.int:
        return self._take(1)[0]

    def short(self) -> builtins.int:
        return int(_H.unpack(self._take(2))[0])

    def int(self) -> builtins.int:
        return int(_I.unpack(self._take(4))[0])

    def long(self) -> builtins.int:
        return int(_Q.unpack(self._take(8))[0])

    def string(self) -> str:
        return self._text(self._take(self.short()))

    def long_string(self) -> str:
        n = self.int()
        if n < 0:
            raise ProtocolError("negative length of a [long string]")
        return self._text(self._take(n))

    def bytes_(self) -> bytes | None:
        n = self.int()
        return None if n < 0 else self._take(n)

    def short_bytes(self) -> bytes:
        return self._take(self.short())

    def value(self) -> bytes | object | None:
        n = self.int()
        if n == -2:
            return UNSET
        if n < 0:
            return None
        return self._take(n)

    def string_map(self) -> dict[str, str]:
        return {self.string(): self.string() for _ in range(self.short())}

    def string_list(self) -> list[str]:
        return [self.string() for _ in range(self.short())]

    def consistency(self) -> builtins.int:
        c = self.short()
        if c not in CONSISTENCIES:
            raise ProtocolError(f"unknown consistency level {c}")
        return c

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(f"{len(self.data) - self.pos} unexpected bytes at the end of the frame body")

    @staticmethod
    def _text(b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("a [string] that is not UTF-8") from None


class Writer:
    """Builds a frame body."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, b: bytes) -> Writer:
        self.parts.append(b)
        return self

    def byte(self, v: builtins.int) -> Writer:
        self.parts.append(bytes((v,)))
        return self

    def short(self, v: builtins.int) -> Writer:
        self.parts.append(_H.pack(v))
        return self

    def int(self, v: builtins.int) -> Writer:
        self.parts.append(_I.pack(v))
        return self

    def long(self, v: builtins.int) -> Writer:
        self.parts.append(_Q.pack(v))
        return self

    def string(self, s: str) -> Writer:
        b = s.encode()
        self.parts.append(_H.pack(len(b)) + b)
        return self

    def long_string(self, s: str) -> Writer:
        b = s.encode()
        self.parts.append(_I.pack(len(b)) + b)
        return self

    def bytes_(self, b: bytes | None) -> Writer:
        self.parts.append(_I.pack(-1) if b is None else _I.pack(len(b)) + b)
        return self

    def short_bytes(self, b: bytes) -> Writer:
        self.parts.append(_H.pack(len(b)) + b)
        return self

    def string_list(self, items: Iterable[str]) -> Writer:
        items = list(items)
        self.short(len(items))
        for s in items:
            self.string(s)
        return self

    def string_multimap(self, m: Mapping[str, Iterable[str]]) -> Writer:
        self.short(len(m))
        for k, v in m.items():
            self.string(k)
            self.string_list(v)
        return self

    def inet(self, host: str, port: builtins.int) -> Writer:
        packed = ipaddress.ip_address(host).packed
        self.parts.append(bytes((len(packed),)) + packed + _I.pack(port))
        return self

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def frame(version: int, stream: int, opcode: int, body: bytes, flags: int = 0) -> bytes:
    """A response frame (the direction bit set in the version byte)."""
    return HEADER.pack(0x80 | version, flags, stream, opcode, len(body)) + body


def error_body(code: int, message: str, extra: bytes = b"") -> bytes:
    return Writer().int(code).string(message).raw(extra).getvalue()


def lz4_compress(body: bytes) -> bytes:
    """The protocol's LZ4 body: the uncompressed length (big-endian [int]), then an LZ4 block."""
    block: bytes = lz4.block.compress(body, store_size=False)
    return struct.pack(">i", len(body)) + block


def lz4_decompress(body: bytes) -> bytes:
    if len(body) < 4:
        raise ProtocolError("compressed frame body shorter than its length prefix")
    size = struct.unpack(">i", body[:4])[0]
    if size < 0 or size > MAX_BODY:
        raise ProtocolError(f"compressed frame body announces {size} bytes")
    try:
        return bytes(lz4.block.decompress(body[4:], uncompressed_size=size))
    except lz4.block.LZ4BlockError as exc:
        raise ProtocolError(f"corrupt LZ4 frame body: {exc}") from None
