"""How the topic log's partition files hold records: Kafka record batches (``batches``), and
the rows of files written before batches were stored (``records``, read only).

Appends that are not Kafka batches already are encoded here once (:func:`encode_chunks`); a
Fetch returns stored batches as they are; the log's own readers (:func:`scan`) decode them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from changefeed.exceptions import CorruptFile
from changefeed.topics.batch import BatchRecords, MalformedBatch, decode_batch, encode_batch, patch_batch

__all__ = [
    "BATCH_BYTES",
    "BATCH_RECORDS",
    "BLOB_READ_MIN",
    "NS_PER_MS",
    "Chunk",
    "Rows",
    "StoredBatches",
    "decode_stored",
    "encode_chunks",
    "first_at_or_after",
    "insert_chunks",
    "largest_timestamp",
    "ns_timestamps",
    "read_stored",
    "scan",
    "watermarks",
]

Int64s = npt.NDArray[np.int64]

#: Appends that are not Kafka batches already are stored as batches of at most this many record
#: bytes or records (the first record of a batch always fits, however large).
BATCH_BYTES = 256 << 10
BATCH_RECORDS = 8192
NS_PER_MS = 1_000_000
#: Stored batches of at least this many bytes are read with SQLite's incremental blob I/O
#: (:func:`read_stored`); smaller ones come with their row, which costs less than opening a blob.
BLOB_READ_MIN = 64 << 10


@dataclass(frozen=True, slots=True)
class Chunk:
    """One batch to store: its bytes with base offset 0 (set when the offset is known)."""

    count: int
    max_ts: int  #: ns
    ts_ns: bytes | None
    data: bytes


def encode_chunks(
    keys: Sequence[bytes | None], values: Sequence[bytes], tss_ns: Sequence[int]
) -> list[Chunk]:
    """Records as Kafka batches (ms timestamps; the ns ones kept beside when they are finer)."""
    n = len(values)
    if n == 0:
        return []
    ts = np.asarray(tss_ns, dtype=np.int64)
    ms = ts // NS_PER_MS
    sizes = np.fromiter(map(len, values), dtype=np.int64, count=n) + 16
    sizes += np.fromiter((0 if k is None else len(k) for k in keys), dtype=np.int64, count=n)
    ends = np.cumsum(sizes)
    out: list[Chunk] = []
    i = 0
    while i < n:
        # the records within BATCH_BYTES of this chunk's start (at least one), at most BATCH_RECORDS
        before = int(ends[i - 1]) if i else 0
        j = int(np.searchsorted(ends, before + BATCH_BYTES, side="right"))
        j = min(max(j, i + 1), i + BATCH_RECORDS, n)
        t = ts[i:j]
        exact = bool((t % NS_PER_MS == 0).all())
        data = encode_batch(0, range(j - i), keys[i:j], values[i:j], ms[i:j].tolist())
        out.append(Chunk(j - i, int(t.max()), None if exact else t.astype("<i8").tobytes(), data))
        i = j
    return out


def insert_chunks(conn: sqlite3.Connection, start: int, chunks: Sequence[Chunk], now: int) -> None:
    """Store ``chunks`` from offset ``start`` on."""
    at = start
    for c in chunks:
        conn.execute(
            "INSERT INTO batches (base_offset, last_offset, max_ts, write_time, ts_ns, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (at, at + c.count - 1, c.max_ts, now, c.ts_ns, patch_batch(c.data, at)),
        )
        at += c.count


@dataclass(frozen=True, slots=True)
class StoredBatches:
    """What :meth:`TopicStore.read_batches` read."""

    earliest: int  #: the partition's earliest available offset
    next_offset: int  #: the high watermark
    data: list[bytes]  #: whole stored batches, the first holding the offset asked for
    end: int  #: the offset after the last record of ``data``
    rows: bool  #: the offset asked for is in old-format rows: read them with read_columns


@dataclass(frozen=True, slots=True)
class Rows:
    """Records read column-wise (:func:`_scan`)."""

    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes]
    timestamps: list[int]  #: ns
    write_times: list[int]


def watermarks(conn: sqlite3.Connection) -> tuple[int, int]:
    """(earliest available offset, next offset) of a partition file."""
    rows, batches, nxt = conn.execute(
        "SELECT (SELECT min(offset) FROM records), (SELECT min(base_offset) FROM batches), next_offset "
        "FROM state WHERE id = 0"
    ).fetchone()
    first = rows if rows is not None else batches
    return (int(nxt) if first is None else int(first)), int(nxt)


def decode_stored(data: bytes, base: int, last: int, ts_ns: bytes | None, path: str) -> BatchRecords:
    try:
        rec = decode_batch(data)
    except MalformedBatch as exc:
        raise CorruptFile(f"corrupt topic file {path}: batch at offset {base}: {exc}") from None
    h = rec.header
    if (
        h.base_offset != base
        or h.count != last - base + 1
        or (ts_ns is not None and len(ts_ns) != 8 * h.count)
    ):
        raise CorruptFile(f"corrupt topic file {path}: batch at offset {base} does not match its row")
    return rec


def ns_timestamps(rec: BatchRecords, ts_ns: bytes | None) -> Int64s:
    if ts_ns is None:
        return rec.timestamps_ms * NS_PER_MS
    return np.frombuffer(ts_ns, dtype="<i8").astype(np.int64)


def scan(conn: sqlite3.Connection, path: str, start: int, end: int, limit: int) -> Rows:
    """Up to ``limit`` records with ``start <= offset < end``, ascending: first those of the old
    row format (which precede every batch), then those of the stored batches."""
    out = Rows([], [], [], [], [])
    if limit <= 0 or start >= end:
        return out
    rows = conn.execute(
        "SELECT offset, key, value, ts, write_time FROM records WHERE offset >= ? AND offset < ? "
        "ORDER BY offset LIMIT ?",
        (start, end, limit),
    ).fetchall()
    for o, k, v, t, w in rows:
        out.offsets.append(o)
        out.keys.append(k)
        out.values.append(v)
        out.timestamps.append(t)
        out.write_times.append(w)
    left = limit - len(rows)
    if left <= 0:
        return out
    lo = out.offsets[-1] + 1 if rows else start
    first = conn.execute("SELECT max(base_offset) FROM batches WHERE base_offset <= ?", (lo,)).fetchone()[0]
    cur = conn.execute(
        "SELECT base_offset, last_offset, write_time, ts_ns, data FROM batches "
        "WHERE base_offset >= ? AND base_offset < ? ORDER BY base_offset",
        (lo if first is None else first, end),
    )
    try:
        for base, last, wt, tsb, blob in cur:
            if last < lo:
                continue
            rec = decode_stored(blob, base, last, tsb, path)
            a = max(lo - base, 0)
            b = min(last + 1, end, base + a + left) - base
            out.offsets.extend(range(base + a, base + b))
            out.keys.extend(rec.keys[a:b])
            out.values.extend(rec.values(b"")[a:b])  # type: ignore[arg-type]
            out.timestamps.extend(ns_timestamps(rec, tsb)[a:b].tolist())
            out.write_times.extend([wt] * (b - a))
            left -= b - a
            if left <= 0:
                break
    finally:
        cur.close()
    return out


def read_stored(conn: sqlite3.Connection, offset: int, max_bytes: int) -> StoredBatches:
    """In a read transaction of a partition file: the stored batches from the one holding
    ``offset`` on, as many whole batches as fit in ``max_bytes`` (the first always), with the
    watermarks (``TopicStore.read_batches``)."""
    data: list[bytes] = []
    earliest, nxt = watermarks(conn)
    if not earliest <= offset < nxt or max_bytes <= 0:
        return StoredBatches(earliest, nxt, data, offset, False)
    if conn.execute("SELECT 1 FROM records WHERE offset >= ? LIMIT 1", (offset,)).fetchone():
        return StoredBatches(earliest, nxt, data, offset, True)
    start = conn.execute("SELECT max(base_offset) FROM batches WHERE base_offset <= ?", (offset,)).fetchone()[
        0
    ]
    # length(data) is read from the row's header, without the batch's pages; a small batch comes
    # with the row, a big one is read through the incremental blob API, straight into its bytes
    # object without holding the GIL (a column value is copied twice, under the GIL: SQLite's
    # overflow pages into a buffer, then into bytes)
    cur = conn.execute(
        "SELECT base_offset, last_offset, length(data), CASE WHEN length(data) < ? THEN data END "
        "FROM batches WHERE base_offset >= ? ORDER BY base_offset",
        (BLOB_READ_MIN, offset if start is None else start),
    )
    end = offset
    total = 0
    try:
        while rows := cur.fetchmany(8):
            for base, last, size, blob in rows:
                if last < offset:
                    continue
                if data and total + size > max_bytes:
                    return StoredBatches(earliest, nxt, data, end, False)
                if blob is None:
                    with conn.blobopen("batches", "data", base, readonly=True) as b:
                        blob = b.read()
                data.append(blob)
                total += size
                end = last + 1
            if total >= max_bytes:
                break
    finally:
        cur.close()
    return StoredBatches(earliest, nxt, data, end, False)


def first_at_or_after(conn: sqlite3.Connection, path: str, ts_ns: int) -> tuple[int, int] | None:
    """In a read transaction of a partition file: (offset, ts ns) of the first record whose
    timestamp is at or after ``ts_ns``, or None."""
    row = conn.execute(
        "SELECT offset, ts FROM records WHERE ts >= ? ORDER BY offset LIMIT 1", (ts_ns,)
    ).fetchone()
    if row is not None:  # old-format records precede every batch
        return int(row[0]), int(row[1])
    row = conn.execute(
        "SELECT base_offset, last_offset, ts_ns, data FROM batches WHERE max_ts >= ? "
        "ORDER BY base_offset LIMIT 1",
        (ts_ns,),
    ).fetchone()
    if row is None:
        return None
    base, last, tsb, blob = row
    tss = ns_timestamps(decode_stored(blob, base, last, tsb, path), tsb)
    i = int(np.argmax(tss >= ts_ns))
    return base + i, int(tss[i])


def largest_timestamp(conn: sqlite3.Connection, path: str, unit_ns: int) -> tuple[int, int] | None:
    """In a read transaction of a partition file: (offset, ts ns) of the first record (lowest
    offset) of the largest timestamp counted in units of ``unit_ns`` (Kafka's ms: records whose
    ns timestamps differ within one ms tie), or None when the partition holds no record."""
    top = conn.execute("SELECT max(ts) FROM records").fetchone()[0]
    stored = conn.execute("SELECT max(max_ts) FROM batches").fetchone()[0]
    tops = [int(t) for t in (top, stored) if t is not None]
    if not tops:
        return None
    floor = max(tops) // unit_ns * unit_ns  # the first ns of the largest unit
    return first_at_or_after(conn, path, floor)
