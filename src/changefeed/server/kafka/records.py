"""Kafka record batches (magic 2): built from topic rows for Fetch, parsed from Produce.

A batch is a 61-byte header (base offset, length, leader epoch, magic, CRC-32C, attributes,
last offset delta, first/max timestamp, producer id/epoch, base sequence, record count) and its
records, each a varint-framed ``attributes, timestamp delta, offset delta, key, value, headers``.
The CRC-32C covers everything from the attributes on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

import crc32c

from changefeed.server.kafka import errors as E
from changefeed.server.kafka.wire import MalformedRequest

__all__ = ["ProducedBatch", "encode_batch", "parse_batches"]

_HEAD = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count: 40 bytes
_BEFORE_CRC = struct.Struct(">qiibI")  # base offset .. CRC: 21 bytes
_CRC_AT = 17  # base offset 8, length 4, epoch 4, magic 1
_ATTR_AT = 21
_COMPRESSION_MASK = 0x07
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


def _zigzag_table(n: int) -> list[bytes]:
    return [_varint_slow(i) for i in range(n)]


def _varint_slow(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


#: Unsigned varints 0..2**14-1, precomputed: lengths and small deltas hit this table.
_VARINT = _zigzag_table(1 << 14)
_NEG_ONE = b"\x01"  # zigzag(-1)


def varint(n: int) -> bytes:
    """Zigzag varint of a signed int."""
    u = (n << 1) ^ (n >> 63)
    if u < 16384:
        return _VARINT[u]
    return _varint_slow(u)


def _uvarint(u: int) -> bytes:
    return _VARINT[u] if u < 16384 else _varint_slow(u)


def encode_batch(
    base_offset: int,
    offsets: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    timestamps_ms: Sequence[int],
) -> bytes:
    """One uncompressed batch of the given rows (offsets ascending, gaps allowed).

    Built column-wise: offset deltas of consecutive offsets and a batch whose records share one
    timestamp (one transaction's changes) take their varints from a precomputed table, so the
    per-record work is a few lookups; the records are joined once and checksummed once."""
    n = len(values)
    table = _VARINT
    base_ts = timestamps_ms[0]
    max_ts = max(timestamps_ms)
    last = offsets[-1] - base_offset
    ods: Sequence[bytes]
    if offsets[0] == base_offset and last == n - 1 and n <= 8192:
        ods = table[0 : 2 * n : 2]
    else:
        ods = [_uvarint((o - base_offset) << 1) for o in offsets]
    # attributes (0) and timestamp delta
    tds: Iterable[bytes]
    if max_ts == base_ts and min(timestamps_ms) == base_ts:
        tds = repeat(b"\x00\x00")
    else:
        tds = [b"\x00" + _uvarint(((t - base_ts) << 1) ^ ((t - base_ts) >> 63)) for t in timestamps_ms]
    parts: list[bytes] = []
    extend = parts.extend
    for td, od, key, value in zip(tds, ods, keys, values, strict=False):
        if key is None:
            head = td + od + _NEG_ONE
            key = b""
        else:
            kl = len(key) << 1
            head = td + od + (table[kl] if kl < 16384 else _varint_slow(kl))
        vl = len(value) << 1
        vv = table[vl] if vl < 16384 else _varint_slow(vl)
        # body: attributes .. key length (head), key, value length, value, header count (0)
        bl = (len(head) + len(key) + len(vv) + len(value) + 1) << 1
        extend((table[bl] if bl < 16384 else _varint_slow(bl), head, key, vv, value, b"\x00"))
    tail = _AFTER_CRC.pack(0, last, base_ts, max_ts, -1, -1, -1, n) + b"".join(parts)
    crc = crc32c.crc32c(tail)
    # length counts from the partition leader epoch on: 4 + 1 + 4 + len(tail)
    return _BEFORE_CRC.pack(base_offset, 9 + len(tail), 0, 2, crc) + tail


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps_ms: list[int]

    @property
    def count(self) -> int:
        return len(self.values)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    u = 0
    while True:
        if pos >= len(data):
            raise MalformedRequest("truncated varint in a record batch")
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise MalformedRequest("varint too long in a record batch")
    return (u >> 1) ^ -(u & 1), pos


class UnsupportedBatch(Exception):
    """A well-formed batch this endpoint does not accept: ``code`` is the Kafka error
    (UNSUPPORTED_FOR_MESSAGE_FORMAT for an old magic, UNSUPPORTED_COMPRESSION_TYPE for a codec)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        import gzip

        return gzip.decompress(data)
    raise UnsupportedBatch(
        f"compression codec {codec} is not supported (use none or gzip)", E.UNSUPPORTED_COMPRESSION_TYPE
    )


def _parse_records(
    body: bytes,
    count: int,
    base_ts: int,
    keys: list[bytes | None],
    values: list[bytes | None],
    tss: list[int],
) -> int:
    """Parse ``count`` records; returns the end position. Varints of one and two bytes (record
    and value lengths up to 8 KiB, offset deltas up to 8191) are decoded inline; longer ones, and
    truncated ones (IndexError, turned into MalformedRequest by the caller), take the slow path."""
    p = 0
    size = len(body)
    key_append = keys.append
    value_append = values.append
    ts_append = tss.append
    for _ in range(count):
        b = body[p]
        if b < 0x80:
            rlen = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := body[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            rlen = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            rlen, p = _read_varint(body, p)
        rend = p + rlen
        if rlen < 0 or rend > size:
            raise MalformedRequest("record runs past its batch")
        b = body[p + 1]  # timestamp delta, after the attributes byte
        if b < 0x80:
            ts_append(base_ts + ((b >> 1) ^ -(b & 1)))
            p += 2
        else:
            tdelta, p = _read_varint(body, p + 1)
            ts_append(base_ts + tdelta)
        b = body[p]  # offset delta (unused: offsets are assigned here)
        if b < 0x80:
            p += 1
        elif body[p + 1] < 0x80:
            p += 2
        else:
            _, p = _read_varint(body, p)
        b = body[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := body[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            n = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            n, p = _read_varint(body, p)
        if n < 0:
            key_append(None)
        else:
            key_append(body[p : p + n])
            p += n
        b = body[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif (c := body[p + 1]) < 0x80:
            u = (b & 0x7F) | (c << 7)
            n = (u >> 1) ^ -(u & 1)
            p += 2
        else:
            n, p = _read_varint(body, p)
        if n < 0:
            value_append(None)
        else:
            value_append(body[p : p + n])
            p += n
        if p > rend:
            raise MalformedRequest("record fields run past the record")
        p = rend  # headers are skipped (the topic log keeps key, value and timestamp)
    return p


def parse_batches(data: bytes) -> list[ProducedBatch]:
    """Every batch in a Produce request's record set; checks each CRC-32C."""
    out: list[ProducedBatch] = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < _HEAD.size:
            raise MalformedRequest("truncated record batch header")
        (_base, length, _epoch, magic, crc, attrs, _last, base_ts, _max_ts, pid, pepoch, base_seq, count) = (
            _HEAD.unpack_from(data, pos)
        )
        if magic != 2:
            raise UnsupportedBatch(
                f"record batch magic {magic} (only magic 2 is supported)", E.UNSUPPORTED_FOR_MESSAGE_FORMAT
            )
        stop = pos + 12 + length
        if length < _HEAD.size - 12 or stop > end:
            raise MalformedRequest("record batch length runs past the request")
        if crc32c.crc32c(data[pos + _ATTR_AT : stop]) != crc:
            raise MalformedRequest("record batch CRC-32C mismatch")
        body = data[pos + _HEAD.size : stop]
        codec = attrs & _COMPRESSION_MASK
        if codec:
            body = _decompress(codec, body)
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        tss: list[int] = []
        try:
            p = _parse_records(body, count, base_ts, keys, values, tss)
        except IndexError:
            raise MalformedRequest("record runs past its batch") from None
        if p != len(body):
            raise MalformedRequest("record batch holds more bytes than its records")
        if not attrs & _CONTROL:
            out.append(ProducedBatch(pid, pepoch, base_seq, bool(attrs & _TRANSACTIONAL), keys, values, tss))
        pos = stop
    return out
