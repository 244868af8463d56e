"""Kafka record batches (magic 2), the topic log's storage format.

A batch is a 61-byte header (base offset, length, partition leader epoch, magic, CRC-32C,
attributes, last offset delta, first/max timestamp, producer id/epoch, base sequence, record
count) and its records, each a varint-framed ``attributes, timestamp delta, offset delta, key,
value, headers``. The CRC-32C covers everything from the attributes on, so the base offset and
the leader epoch can be set without recomputing it.

The topic log stores every append as such batches (``changefeed.topics.store``), so the Kafka
endpoint serves a Fetch as the stored bytes; this module encodes them (for appends that are not
Kafka batches already) and parses them (for the log's own readers and for Produce requests).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

import crc32c
import numpy as np
import numpy.typing as npt

from changefeed.topics import codecs

__all__ = [
    "ATTR_AT",
    "CONTROL",
    "CRC_AT",
    "HEAD",
    "TRANSACTIONAL",
    "BatchHeader",
    "BatchRecords",
    "MalformedBatch",
    "compress_batch",
    "decode_batch",
    "decompress",
    "encode_batch",
    "parse_records",
    "patch_batch",
    "reframe_batch",
]

Int64s = npt.NDArray[np.int64]


class MalformedBatch(Exception):
    """Bytes that do not parse as a record batch (callers turn it into their own error: a
    Produce request's CORRUPT_MESSAGE, a stored batch's CorruptFile)."""


HEAD = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count: 40 bytes
_BEFORE_CRC = struct.Struct(">qiibI")  # base offset .. CRC: 21 bytes
CRC_AT = 17  # base offset 8, length 4, epoch 4, magic 1
ATTR_AT = 21
COMPRESSION_MASK = 0x07
TRANSACTIONAL = 0x10
CONTROL = 0x20


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


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    u = 0
    while True:
        if pos >= len(data):
            raise MalformedBatch("truncated varint in a record batch")
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise MalformedBatch("varint too long in a record batch")
    return (u >> 1) ^ -(u & 1), pos


def _record_bounds(body: bytes, count: int) -> tuple[list[int], list[int]]:
    """Where each of ``count`` records starts (after its length varint) and ends. The only loop
    over the records in Python: one length each, one- and two-byte varints inline."""
    starts: list[int] = []
    ends: list[int] = []
    start_append = starts.append
    end_append = ends.append
    p = 0
    size = len(body)
    try:
        for _ in range(count):
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
            start_append(p)
            p += n
            if n < 0 or p > size:
                raise MalformedBatch("record runs past its batch")
            end_append(p)
    except IndexError:
        raise MalformedBatch("record runs past its batch") from None
    return starts, ends


#: Zero bytes after a batch's records in the array :func:`_varints` reads: room for the three
#: longest varints before the key, so reading them never runs off the array; whether every field
#: lies within its record is checked after the key and after the value.
_PAD = 32


def _varints(u: npt.NDArray[np.uint8], pos: Int64s) -> tuple[Int64s, Int64s]:
    """The zigzag varints at ``pos`` of every record at once: (values, sizes in bytes). Varints
    of one and two bytes (lengths and deltas below 8192) take no loop."""
    b0 = u[pos]
    if int(b0.max(initial=0)) < 0x80:  # every varint one byte: lengths and deltas below 64
        v = b0.astype(np.int64)
        return (v >> 1) ^ -(v & 1), np.ones(len(pos), dtype=np.int64)
    c0 = b0 >> 7
    b1 = u[pos + 1]
    if int((b1 & (c0 << 7)).max()) < 0x80:  # none longer than two bytes
        v = (b0 & 0x7F).astype(np.int64) | (b1 * c0).astype(np.int64) << 7
        return (v >> 1) ^ -(v & 1), c0.astype(np.int64) + 1
    acc = (b0 & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(c0)
    shift = 7
    while more.size:
        if shift > 63:
            raise MalformedBatch("varint too long in a record batch")
        b = u[pos[more] + size[more]]
        acc[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[b >= 0x80]
        shift += 7
    return (acc >> np.uint64(1)).astype(np.int64) ^ -(acc & np.uint64(1)).astype(np.int64), size


#: Batches of fewer records are parsed record by record: numpy's per-call overhead would
#: outweigh its per-record gain.
_FEW = 64
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


def _varint_in(body: bytes, p: int, end: int) -> tuple[int, int]:
    """The zigzag varint at ``p``, which must end before ``end``: (value, position after)."""
    u = 0
    shift = 0
    while True:
        if p >= end:
            raise MalformedBatch("record fields run past the record")
        b = body[p]
        p += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            return (u >> 1) ^ -(u & 1), p
        shift += 7
        if shift > 63:
            raise MalformedBatch("varint too long in a record batch")


def _parse_few(body: bytes, count: int, base_ts: int) -> tuple[Int64s, ...]:
    """:func:`parse_records` one record at a time, for small batches."""
    cols: tuple[list[int], ...] = ([], [], [], [], [], [])
    ks_, kl_, vs_, vl_, ts_, od_ = cols
    p = 0
    size = len(body)
    for _ in range(count):
        n, p = _varint_in(body, p, size)
        end = p + n
        if n < 0 or end > size:
            raise MalformedBatch("record runs past its batch")
        td, q = _varint_in(body, p + 1, end)
        od, q = _varint_in(body, q, end)
        od_.append(od)
        kl, q = _varint_in(body, q, end)
        if kl < -1:
            raise MalformedBatch("record fields run past the record")
        ks_.append(q)
        kl_.append(kl)
        vl, q = _varint_in(body, q + max(kl, 0), end)
        if vl < -1 or q + max(vl, 0) > end:
            raise MalformedBatch("record fields run past the record")
        vs_.append(q)
        vl_.append(vl)
        ts_.append(min(max(base_ts + td, _I64_MIN), _I64_MAX))
        p = end
    if p != size:
        raise MalformedBatch("record batch holds more bytes than its records")
    ks, kl_a, vs, vl_a, ts, od_a = (np.array(c, dtype=np.int64) for c in cols)
    return ks, kl_a, vs, vl_a, ts, od_a


def parse_records(body: bytes, count: int, base_ts: int) -> tuple[Int64s, ...]:
    """(key starts, key lengths, value starts, value lengths, timestamps, offset deltas) of
    ``count`` records.
    Record boundaries are found in one Python loop; each field is then decoded for every record
    at once with numpy (attributes, timestamp delta, offset delta, key, value; headers are
    skipped: the stored batch keeps them)."""
    if count < _FEW:
        return _parse_few(body, count, base_ts)
    starts, ends = _record_bounds(body, count)
    if (ends[-1] if ends else 0) != len(body):
        raise MalformedBatch("record batch holds more bytes than its records")
    u = np.zeros(len(body) + _PAD, dtype=np.uint8)
    u[: len(body)] = np.frombuffer(body, dtype=np.uint8)
    end = np.frombuffer(array("q", ends), dtype=np.int64)
    p = np.frombuffer(array("q", starts), dtype=np.int64) + 1  # after the attributes byte
    tdelta, n = _varints(u, p)
    p += n
    odelta, n = _varints(u, p)
    p += n
    kl, n = _varints(u, p)
    ks = p + n
    kend = ks + np.maximum(kl, 0)
    if count and (int(kl.min()) < -1 or bool((kend >= end).any())):
        raise MalformedBatch("record fields run past the record")
    vl, n = _varints(u, kend)
    vs = kend + n
    if count and (int(vl.min()) < -1 or bool((vs + np.maximum(vl, 0) > end).any())):
        raise MalformedBatch("record fields run past the record")
    return ks, kl, vs, vl, _add_saturating(tdelta, base_ts), odelta


def reframe_batch(
    body: bytes,
    count: int,
    timestamps_ms: Sequence[int],
    producer: tuple[int, int, int] = (-1, -1, -1),
) -> bytes:
    """The ``count`` records of an uncompressed records ``body`` as one new uncompressed batch
    (base offset 0) with offset deltas 0..count-1 and the given timestamps (a producer's batch
    the log cannot keep as framed: records without a timestamp, gaps in its offset deltas).
    Only each record's attributes, timestamp and offset deltas are written anew: its key, value
    (a null one stays null) and headers are copied byte for byte. ``producer``: the producer
    id, epoch and base sequence the new header carries."""
    starts, ends = _record_bounds(body, count)
    if (ends[-1] if ends else 0) != len(body):
        raise MalformedBatch("record batch holds more bytes than its records")
    base_ts = int(timestamps_ms[0])
    max_ts = max(int(t) for t in timestamps_ms)
    parts: list[bytes] = []
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        _, p = _read_varint(body, start + 1)  # the timestamp delta, after the attributes byte
        _, p = _read_varint(body, p)  # the offset delta; the key length starts here
        if p > end:
            raise MalformedBatch("record fields run past the record")
        record = b"\x00" + varint(int(timestamps_ms[i]) - base_ts) + varint(i) + body[p:end]
        parts.append(varint(len(record)))
        parts.append(record)
    pid, epoch, seq = producer
    tail = _AFTER_CRC.pack(0, count - 1, base_ts, max_ts, pid, epoch, seq, count) + b"".join(parts)
    return _BEFORE_CRC.pack(0, 9 + len(tail), 0, 2, crc32c.crc32c(tail)) + tail


def _add_saturating(deltas: Int64s, base: int) -> Int64s:
    """``base + deltas`` held at the int64 ends instead of wrapping: a timestamp past them is
    still out of range (INVALID_TIMESTAMP) or negative (none), as with Python ints."""
    out = deltas + np.int64(base)
    if base >= 0:
        over = (deltas > 0) & (out < 0)
        if over.any():
            out[over] = _I64_MAX
    else:
        under = (deltas < 0) & (out >= 0)
        if under.any():
            out[under] = _I64_MIN
    return out


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one batch."""

    base_offset: int
    length: int  #: bytes after the length field: the batch is ``12 + length`` bytes
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_ts: int
    max_ts: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @classmethod
    def read(cls, data: bytes | memoryview, pos: int = 0) -> BatchHeader:
        if len(data) - pos < HEAD.size:
            raise MalformedBatch("truncated record batch header")
        return cls(*HEAD.unpack_from(data, pos))

    @property
    def size(self) -> int:
        return 12 + self.length

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK


def decompress(codec: int, data: bytes) -> bytes:
    """The records of a batch compressed with ``codec`` (any of Kafka's: none, gzip, snappy,
    lz4, zstd; :mod:`changefeed.topics.codecs`)."""
    if codec == 0:
        return data
    try:
        return codecs.decompress(codec, data)
    except codecs.CodecError as exc:
        raise MalformedBatch(str(exc)) from None


def compress_batch(data: bytes | memoryview, codec: int) -> bytes:
    """An uncompressed batch (as :func:`encode_batch` makes) with its records compressed with
    ``codec``: the attributes' codec bits, the length and the CRC-32C set to match."""
    h = BatchHeader.read(data)
    if h.codec:
        raise MalformedBatch("the batch is compressed already")
    body = codecs.compress(codec, bytes(data[HEAD.size : h.size]))
    head = bytearray(data[: HEAD.size])
    struct.pack_into(">i", head, 8, HEAD.size - 12 + len(body))
    struct.pack_into(">h", head, ATTR_AT, (h.attributes & ~COMPRESSION_MASK) | codec)
    out = head + body
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(memoryview(out)[ATTR_AT:]))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class BatchRecords:
    """One batch's records as slices of its (decompressed) record bytes ``body``: starts and
    lengths (-1: null) of keys and values, timestamps in ms and offset deltas."""

    header: BatchHeader
    body: bytes
    key_starts: Int64s
    key_lengths: Int64s
    value_starts: Int64s
    value_lengths: Int64s
    timestamps_ms: Int64s
    offset_deltas: Int64s

    @property
    def keys(self) -> list[bytes | None]:
        d = self.body
        return [
            None if n < 0 else d[s : s + n]
            for s, n in zip(self.key_starts.tolist(), self.key_lengths.tolist(), strict=True)
        ]

    def values(self, null: bytes | None = None) -> list[bytes | None]:
        """The values, a null one as ``null``."""
        d = self.body
        return [
            null if n < 0 else d[s : s + n]
            for s, n in zip(self.value_starts.tolist(), self.value_lengths.tolist(), strict=True)
        ]


def decode_batch(data: bytes | memoryview, pos: int = 0, check_crc: bool = True) -> BatchRecords:
    """The batch at ``pos`` of ``data``: magic 2, its CRC-32C checked, its records parsed."""
    h = BatchHeader.read(data, pos)
    if h.magic != 2:
        raise MalformedBatch(f"record batch magic {h.magic} (only magic 2 is supported)")
    stop = pos + h.size
    if h.length < HEAD.size - 12 or stop > len(data):
        raise MalformedBatch("record batch length runs past its data")
    if check_crc and crc32c.crc32c(data[pos + ATTR_AT : stop]) != h.crc:
        raise MalformedBatch("record batch CRC-32C mismatch")
    if h.count < 0:
        raise MalformedBatch("negative record count")
    body = decompress(h.codec, bytes(data[pos + HEAD.size : stop]))
    ks, kl, vs, vl, ts, od = parse_records(body, h.count, h.first_ts)
    return BatchRecords(h, body, ks, kl, vs, vl, ts, od)


def patch_batch(data: bytes | memoryview, base_offset: int, max_ts: int | None = None) -> bytes:
    """The batch with its base offset set (and its partition leader epoch 0, this log's only
    epoch); with ``max_ts``, its max timestamp set too and the CRC-32C recomputed."""
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, 0)
    if max_ts is not None:
        struct.pack_into(">q", out, _MAX_TS_AT, max_ts)
        struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(memoryview(out)[ATTR_AT:]))
    return bytes(out)


_MAX_TS_AT = 35  # base offset 8, length 4, epoch 4, magic 1, crc 4, attributes 2, last delta 4, first ts 8
