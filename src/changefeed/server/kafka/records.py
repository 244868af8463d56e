"""Kafka record batches (magic 2): built from topic rows for Fetch, parsed from Produce.

A batch is a 61-byte header (base offset, length, leader epoch, magic, CRC-32C, attributes,
last offset delta, first/max timestamp, producer id/epoch, base sequence, record count) and its
records, each a varint-framed ``attributes, timestamp delta, offset delta, key, value, headers``.
The CRC-32C covers everything from the attributes on.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from changefeed.server.kafka import errors as E
from changefeed.server.kafka.wire import MalformedRequest

__all__ = ["ProducedBatch", "encode_batch", "parse_batches"]

_HEAD = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count: 40 bytes
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


def encode_batch(
    base_offset: int,
    offsets: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    timestamps_ms: Sequence[int],
) -> bytes:
    """One uncompressed batch of the given rows (offsets ascending, gaps allowed)."""
    table = _VARINT
    base_ts = timestamps_ms[0]
    max_ts = max(timestamps_ms)
    parts: list[bytes] = []
    extend = parts.extend
    for off, key, value, ts in zip(offsets, keys, values, timestamps_ms, strict=True):
        d = (off - base_offset) << 1
        t = ts - base_ts
        tu = (t << 1) ^ (t >> 63)
        tv = table[tu] if tu < 16384 else _varint_slow(tu)
        dv = table[d] if d < 16384 else _varint_slow(d)
        vl = len(value) << 1
        vv = table[vl] if vl < 16384 else _varint_slow(vl)
        if key is None:
            kv = _NEG_ONE
            key = b""
        else:
            kl = len(key) << 1
            kv = table[kl] if kl < 16384 else _varint_slow(kl)
        # body: attributes, timestamp delta, offset delta, key length, key, value length, value,
        # header count (0)
        bl = (2 + len(tv) + len(dv) + len(kv) + len(key) + len(vv) + len(value)) << 1
        extend((table[bl] if bl < 16384 else _varint_slow(bl), b"\x00", tv, dv, kv, key, vv, value, b"\x00"))
    records = b"".join(parts)
    tail = _AFTER_CRC.pack(0, offsets[-1] - base_offset, base_ts, max_ts, -1, -1, -1, len(offsets)) + records
    crc = crc32c.crc32c(tail)
    # length counts from the partition leader epoch on: 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, 9 + len(tail), 0, 2, crc) + tail


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
    """Parse ``count`` records; returns the end position. One-byte varints (the common case
    for deltas and small lengths) are decoded inline."""
    p = 0
    size = len(body)
    for _ in range(count):
        b = body[p]
        if b < 0x80:
            rlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            rlen, p = _read_varint(body, p)
        rend = p + rlen
        if rlen < 0 or rend > size:
            raise MalformedRequest("record runs past its batch")
        b = body[p + 1]  # after the attributes byte
        if b < 0x80:
            tdelta = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            tdelta, p = _read_varint(body, p + 1)
        b = body[p]  # offset delta (unused: offsets are assigned here)
        if b < 0x80:
            p += 1
        else:
            _, p = _read_varint(body, p)
        b = body[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _read_varint(body, p)
        if n < 0:
            keys.append(None)
        else:
            keys.append(body[p : p + n])
            p += n
        b = body[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _read_varint(body, p)
        if n < 0:
            values.append(None)
        else:
            values.append(body[p : p + n])
            p += n
        if p > rend:
            raise MalformedRequest("record fields run past the record")
        tss.append(base_ts + tdelta)
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
