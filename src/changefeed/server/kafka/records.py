"""Kafka record batches (magic 2) of Produce requests, parsed and checked; the batch format
itself (and the encoder of batches the log did not receive as such) is the topic log's:
:mod:`changefeed.topics.batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
import numpy as np
import numpy.typing as npt

from changefeed.server.kafka import errors as E
from changefeed.server.kafka.wire import MalformedRequest
from changefeed.topics.batch import (
    ATTR_AT,
    CONTROL,
    HEAD,
    TRANSACTIONAL,
    BatchHeader,
    MalformedBatch,
    decompress,
    encode_batch,
    parse_records,
)
from changefeed.topics.codecs import CODECS, ZSTD

__all__ = ["ZSTD_MIN_PRODUCE_VERSION", "ProducedBatch", "UnsupportedBatch", "encode_batch", "parse_batches"]

Int64s = npt.NDArray[np.int64]

#: The first Produce version that may carry zstd batches (KIP-110); older ones get
#: UNSUPPORTED_COMPRESSION_TYPE, as from Kafka.
ZSTD_MIN_PRODUCE_VERSION = 7


@dataclass(frozen=True, slots=True)
class ProducedBatch:
    """One produced batch's records as slices of its record bytes (``data``): key and value
    starts and lengths (-1: null) and timestamps in ms (-1: none), one array element a record."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    data: bytes
    key_starts: Int64s
    key_lengths: Int64s
    value_starts: Int64s
    value_lengths: Int64s
    timestamps_ms: Int64s
    #: The batch as received (None when built from lists): stored as it is when its offset
    #: deltas are 0..count-1 and its max timestamp is its records' (see ``storable``).
    raw: bytes | None = None
    offset_deltas: Int64s | None = None
    header: BatchHeader | None = None

    @property
    def storable(self) -> bool:
        """True if :attr:`raw` can be kept as this batch's stored form once its base offset is
        set: offsets 0..count-1, as the log assigns them; every record with a timestamp."""
        h, od = self.header, self.offset_deltas
        n = self.count
        return (
            self.raw is not None
            and h is not None
            and od is not None
            and n > 0
            and h.last_offset_delta == n - 1
            and bool((od == np.arange(n, dtype=np.int64)).all())
            and int(self.timestamps_ms.min()) >= 0
        )

    @property
    def count(self) -> int:
        return len(self.value_lengths)

    @property
    def keys(self) -> list[bytes | None]:
        return _slices(self.data, self.key_starts, self.key_lengths)

    @property
    def values(self) -> list[bytes | None]:
        return _slices(self.data, self.value_starts, self.value_lengths)

    @classmethod
    def from_lists(
        cls,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        transactional: bool,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        timestamps_ms: Sequence[int],
    ) -> ProducedBatch:
        """A batch of the given records (for tests and callers that hold Python objects)."""
        data = bytearray()
        cols: list[list[int]] = [[], [], [], []]
        for k, v in zip(keys, values, strict=True):
            for x, starts, lengths in ((k, cols[0], cols[1]), (v, cols[2], cols[3])):
                starts.append(len(data))
                lengths.append(-1 if x is None else len(x))
                data += x or b""
        ks, kl, vs, vl = (np.array(c, dtype=np.int64) for c in cols)
        ts = np.array(timestamps_ms, dtype=np.int64)
        return cls(producer_id, producer_epoch, base_sequence, transactional, bytes(data), ks, kl, vs, vl, ts)


def _slices(data: bytes, starts: Int64s, lengths: Int64s) -> list[bytes | None]:
    return [
        None if n < 0 else data[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
    ]


class UnsupportedBatch(Exception):
    """A batch refused with a Kafka error of its own, ``code``: UNSUPPORTED_FOR_MESSAGE_FORMAT
    for an old magic, UNSUPPORTED_COMPRESSION_TYPE for a codec Kafka does not define (or zstd
    before Produce v7), UNKNOWN_SERVER_ERROR for compressed records that do not decompress (as
    Kafka answers them)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_batches(data: bytes, version: int = ZSTD_MIN_PRODUCE_VERSION) -> list[ProducedBatch]:
    """Every batch in a Produce request (of ``version``)'s record set; checks each CRC-32C and
    decompresses each compressed one (any of Kafka's codecs; zstd only from Produce v7 on, as
    Kafka accepts it). Control batches (a transaction's markers) are left out."""
    out: list[ProducedBatch] = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < HEAD.size:
            raise MalformedRequest("truncated record batch header")
        h = BatchHeader.read(data, pos)
        if h.magic != 2:
            raise UnsupportedBatch(
                f"record batch magic {h.magic} (only magic 2 is supported)", E.UNSUPPORTED_FOR_MESSAGE_FORMAT
            )
        stop = pos + h.size
        if h.length < HEAD.size - 12 or stop > end:
            raise MalformedRequest("record batch length runs past the request")
        if crc32c.crc32c(data[pos + ATTR_AT : stop]) != h.crc:
            raise MalformedRequest("record batch CRC-32C mismatch")
        if h.codec not in CODECS:
            raise UnsupportedBatch(
                f"compression codec {h.codec} is not one Kafka defines (none, gzip, snappy, lz4, zstd)",
                E.UNSUPPORTED_COMPRESSION_TYPE,
            )
        if h.codec == ZSTD and version < ZSTD_MIN_PRODUCE_VERSION:
            raise UnsupportedBatch(
                f"Produce requests with version {version} are not allowed to use zstd compression "
                f"(version {ZSTD_MIN_PRODUCE_VERSION} or later is)",
                E.UNSUPPORTED_COMPRESSION_TYPE,
            )
        if h.count < 0:
            raise MalformedRequest("negative record count")
        try:
            body = decompress(h.codec, data[pos + HEAD.size : stop])
        except MalformedBatch as exc:
            # Kafka's broker answers records that do not decompress with UNKNOWN_SERVER_ERROR
            # (its "Failed to decompress record stream" is no API error); the message says why.
            raise UnsupportedBatch(str(exc), E.UNKNOWN_SERVER_ERROR) from None
        try:
            ks, kl, vs, vl, ts, od = parse_records(body, h.count, h.first_ts)
        except MalformedBatch as exc:
            raise MalformedRequest(str(exc)) from None
        if not h.attributes & CONTROL:
            raw = data[pos:stop]
            transactional = bool(h.attributes & TRANSACTIONAL)
            out.append(
                ProducedBatch(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    transactional,
                    body,
                    ks,
                    kl,
                    vs,
                    vl,
                    ts,
                    raw,
                    od,
                    h,
                )
            )
        pos = stop
    return out
