"""What the Kafka endpoint serves, apart from the wire: topic reads and writes on the embedded
log, producer ids, the group coordinator, and the notification long polls wait on.

Every SQLite call runs in the event loop's thread pool (:meth:`Broker.run`); appends to one
partition are serialised by an asyncio lock so an idempotent producer's sequence check and its
append are one step.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import functools
import operator
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from changefeed.exceptions import ChangefeedError, TopicError
from changefeed.server.kafka import errors as E, versions as V
from changefeed.server.kafka.authz import Authorizer
from changefeed.server.kafka.groups import Coordinator
from changefeed.server.kafka.records import ProducedBatch, encode_batch
from changefeed.sqlite_wal import use_wal
from changefeed.topics.batch import MalformedBatch, patch_batch, reframe_batch
from changefeed.topics.segments import StoredBatches
from changefeed.topics.store import Appended, RecordSlices, TopicInfo, TopicStore

__all__ = ["Broker", "FetchResult", "ProduceResult"]

T = TypeVar("T")

#: Rows fetched per partition are bounded by bytes; this caps one query's rows.
_MAX_ROWS_PER_FETCH = 50_000
_RECORD_OVERHEAD = 12  # framing bytes per record, about
#: The largest record timestamp the topic log holds in int64 nanoseconds (year 2262).
_MAX_TIMESTAMP_MS = (1 << 63) // 1_000_000 - 1
#: Encoded fetch windows kept for re-reads and read-ahead.
_CACHE_BYTES = 64 << 20
#: Each partition file is read through a memory mapping of up to this many bytes (a Fetch's
#: batches are copied once, from the mapping, instead of read() into SQLite's cache and copied on).
_MMAP_BYTES = 1 << 30
#: A fetch waits this long at most for a read-ahead of the same window already under way.
_READ_AHEAD_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class FetchResult:
    error: int
    high_watermark: int
    log_start: int
    records: bytes | None  #: the first stored batch (or all records, encoded), None on error
    more_at: int | None = None  #: the offset after the records when more were left unread
    more: tuple[bytes, ...] = ()  #: the stored batches after the first, sent as they are

    @property
    def size(self) -> int:
        return len(self.records or b"") + sum(map(len, self.more))

    @property
    def data(self) -> bytes:
        """The record batches joined."""
        return b"".join([self.records or b"", *self.more])


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: int
    base_offset: int
    log_start: int
    message: str | None = None


def _cumulative_sizes(keys: Sequence[bytes | None], values: Sequence[bytes], start: int = 0) -> list[int]:
    """Running totals of the records' approximate encoded sizes, summed in C."""
    sizes: Iterable[int] = map(operator.add, map(len, values), repeat(_RECORD_OVERHEAD))
    if None in keys:
        sizes = map(operator.add, sizes, [0 if k is None else len(k) for k in keys])
    else:
        sizes = map(operator.add, sizes, map(len, keys))  # type: ignore[arg-type]
    return list(accumulate(sizes, initial=start))[1:]


class BatchCache:
    """Encoded fetch results by (topic id, partition, offset, max bytes), least recently used
    first out past ``capacity`` bytes. Records are immutable once written and topic ids are never
    reused, so an entry stays right; only watermarks change, and callers refresh those. Only
    windows cut short (``more_at`` set) are kept: a window that reached the end of the partition
    would hide later appends. Thread-safe; :meth:`claim` marks a key being computed (read-ahead)
    so it is computed once, and :meth:`get` waits for a claimed key instead of computing it again."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, int, int, int], FetchResult] = OrderedDict()
        self._size = 0
        self._claimed: dict[tuple[int, int, int, int], threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int, int, int]) -> FetchResult | None:
        with self._lock:
            res = self._entries.get(key)
            if res is not None:
                self._entries.move_to_end(key)
                return res
            pending = self._claimed.get(key)
        if pending is None or not pending.wait(_READ_AHEAD_WAIT_S):
            return None
        with self._lock:
            return self._entries.get(key)

    def put(self, key: tuple[int, int, int, int], res: FetchResult) -> None:
        size = res.size  # the encoded records, or every stored batch of the window
        with self._lock:
            if key in self._entries or size > self.capacity:
                return
            self._entries[key] = res
            self._size += size
            while self._size > self.capacity:
                _, old = self._entries.popitem(last=False)
                self._size -= old.size

    def claim(self, key: tuple[int, int, int, int]) -> bool:
        """True if the caller should compute ``key`` (neither cached nor being computed)."""
        with self._lock:
            if key in self._entries or key in self._claimed:
                return False
            self._claimed[key] = threading.Event()
            return True

    def release(self, key: tuple[int, int, int, int]) -> None:
        with self._lock:
            ev = self._claimed.pop(key, None)
        if ev is not None:
            ev.set()


class ProducerIds:
    """Producer ids for InitProducerId, from a counter that survives restarts."""

    def __init__(self, db: Path) -> None:
        self.path = db / "kafka" / "producers.sqlite"

    def next_id(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=60)
        try:
            use_wal(conn)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ids (id INTEGER PRIMARY KEY CHECK (id = 0), next INTEGER)"
            )
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT next FROM ids WHERE id = 0").fetchone()
            pid = 1000 if row is None else int(row[0])
            conn.execute("INSERT OR REPLACE INTO ids (id, next) VALUES (0, ?)", (pid + 1,))
            conn.execute("COMMIT")
            return pid
        finally:
            conn.close()


class Broker:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.store = TopicStore(db, mmap_bytes=_MMAP_BYTES)
        self.coordinator = Coordinator()
        self.authz = Authorizer(db)
        self.producer_ids = ProducerIds(db)
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._changed = asyncio.Event()
        self._avg_size: dict[tuple[str, int], int] = {}
        self._last_batch_id = 0
        self._cache = BatchCache(_CACHE_BYTES)
        # One read-ahead thread: encoding holds the GIL, and a second thread measured more CPU
        # per message (contention), not more messages.
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka-read-ahead")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.authz.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))

    # -- notifications -----------------------------------------------------------------------

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float) -> None:
        """Wait for an append through this endpoint, or ``timeout`` (other writers, such as the
        Spark pipeline, are seen by polling)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # -- topics ------------------------------------------------------------------------------

    def topic_or_none(self, name: str) -> TopicInfo | None:
        """The topic ``name``; else, for clients that refuse ``/`` in topic names (kafka-python),
        the one topic whose name with each ``/`` read as ``.`` is ``name`` (``orders.updates``
        names ``orders/updates`` when no topic ``orders.updates`` exists)."""
        try:
            return self.store.topic(name)
        except TopicError:
            pass
        if "." not in name:
            return None
        found = [t for t in self.store.topics() if "/" in t.name and t.name.replace("/", ".") == name]
        return found[0] if len(found) == 1 else None

    def topic_for(self, user: str, name: str, action: str) -> tuple[TopicInfo | None, int]:
        """(topic, error): UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED or NONE."""
        info = self.topic_or_none(name)
        if info is None:
            bad = not name or not name.isprintable()
            return None, E.INVALID_TOPIC_EXCEPTION if bad else E.UNKNOWN_TOPIC_OR_PARTITION
        if not self.authz.allowed(user, info.name, action):
            return None, E.TOPIC_AUTHORIZATION_FAILED
        return info, E.NONE

    # -- fetch -------------------------------------------------------------------------------

    def fetch_partition(self, info: TopicInfo, partition: int, offset: int, max_bytes: int) -> FetchResult:
        """Runs in a worker thread. The stored batches from the one holding ``offset`` on, as
        they are (the first may start before ``offset``: clients skip its leading records, as
        they do with Kafka's), whole batches up to ``max_bytes`` (the first always)."""
        if not 0 <= partition < info.partitions:
            return FetchResult(E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, None)
        key = (info.id, partition, offset, max_bytes)
        res = self._cached(key, info) if max_bytes > 0 else None
        if res is None:
            got = self.store.read_batches(info, partition, offset, max(max_bytes, 0))
            if got.rows:
                return self._fetch_rows(info, partition, offset, max_bytes)
            res = self._batches_result(got, offset, max_bytes)
        # the next window's batches are read while the client takes these (SQLite reads
        # without the GIL); a batch at an offset never changes
        self._read_next(res, key, info, self._read_ahead_batches)
        return res

    def _cached(self, key: tuple[int, int, int, int], info: TopicInfo) -> FetchResult | None:
        """The window ``key`` read earlier (or ahead), with fresh watermarks; None if not kept."""
        res = self._cache.get(key)
        if res is None:
            return None
        earliest, nxt = self.store.partition_watermarks(info, key[1])
        if key[2] < earliest or key[2] > nxt:
            return FetchResult(E.OFFSET_OUT_OF_RANGE, nxt, earliest, None)
        return replace(res, high_watermark=nxt, log_start=earliest)

    def _read_next(
        self,
        res: FetchResult,
        key: tuple[int, int, int, int],
        info: TopicInfo,
        read: Callable[[tuple[int, int, int, int], TopicInfo], None],
    ) -> None:
        """Read the window after ``res`` ahead (``read`` in the read-ahead thread), once."""
        if res.more_at is None or key[3] <= 0:
            return
        nxt_key = (key[0], key[1], res.more_at, key[3])
        if self._cache.claim(nxt_key):
            try:
                self._pool.submit(read, nxt_key, info)
            except RuntimeError:  # shutting down
                self._cache.release(nxt_key)

    @staticmethod
    def _batches_result(got: StoredBatches, offset: int, max_bytes: int) -> FetchResult:
        earliest, nxt = got.earliest, got.next_offset
        if offset < earliest or offset > nxt:
            return FetchResult(E.OFFSET_OUT_OF_RANGE, nxt, earliest, None)
        if max_bytes <= 0 or not got.data:
            return FetchResult(E.NONE, nxt, earliest, b"")
        more_at = got.end if got.end < nxt else None
        return FetchResult(E.NONE, nxt, earliest, got.data[0], more_at, tuple(got.data[1:]))

    def _read_ahead_batches(self, key: tuple[int, int, int, int], info: TopicInfo) -> None:
        res: FetchResult | None = None
        try:
            got = self.store.read_batches(info, key[1], key[2], key[3])
            if not got.rows:
                res = self._batches_result(got, key[2], key[3])
        except ChangefeedError:
            res = None
        finally:
            self._cache.release(key)
        if res is not None and res.error == E.NONE and res.more_at is not None:
            self._cache.put(key, res)

    def _fetch_rows(self, info: TopicInfo, partition: int, offset: int, max_bytes: int) -> FetchResult:
        """:meth:`fetch_partition` of records in the row format of files written before the log
        stored batches, encoded here. A batch already encoded for (partition, offset,
        max_bytes), by an earlier fetch or by read-ahead, is served from :class:`BatchCache` with
        fresh watermarks: repeated and concurrent readers of the same records pay for one
        encoding."""
        key = (info.id, partition, offset, max_bytes)
        res = self._cached(key, info)
        if res is None:
            res = self._fetch(info, partition, offset, max_bytes)
            if res.more_at is not None:
                self._cache.put(key, res)
        # the next window is read and encoded while the client takes this one
        self._read_next(res, key, info, self._read_ahead)
        return res

    def _read_ahead(self, key: tuple[int, int, int, int], info: TopicInfo) -> None:
        try:
            res = self._fetch(info, key[1], key[2], key[3])
        except ChangefeedError:
            res = None
        finally:
            self._cache.release(key)
        if res is not None and res.more_at is not None:
            self._cache.put(key, res)

    def _fetch(self, info: TopicInfo, partition: int, offset: int, max_bytes: int) -> FetchResult:
        key = (info.name, partition)
        avg = self._avg_size.get(key, 256)
        limit = max(1, min(_MAX_ROWS_PER_FETCH, max_bytes // avg + 1))
        cols = self.store.read_columns(info, partition, max(offset, 0), limit, ts_unit_ns=1_000_000)
        earliest, nxt = cols.earliest, cols.next_offset
        if offset < earliest or offset > nxt:
            return FetchResult(E.OFFSET_OUT_OF_RANGE, nxt, earliest, None)
        offsets, keys, values, tss = cols.offsets, cols.keys, cols.values, cols.timestamps
        if not values:
            return FetchResult(E.NONE, nxt, earliest, b"")
        ends = _cumulative_sizes(keys, values)
        # The row count estimated from the average size fell short of max_bytes (smaller records
        # than before): read on, a few times at most.
        for _ in range(3):
            n = len(values)
            if ends[-1] >= max_bytes or n >= _MAX_ROWS_PER_FETCH or offsets[-1] + 1 >= nxt:
                break
            want = min(_MAX_ROWS_PER_FETCH - n, (max_bytes - ends[-1]) // max(16, ends[-1] // n) + 1)
            more = self.store.read_columns(info, partition, offsets[-1] + 1, want, ts_unit_ns=1_000_000)
            nxt = more.next_offset
            if not more.values:
                break
            offsets = [*offsets, *more.offsets]
            keys = [*keys, *more.keys]
            values = [*values, *more.values]
            tss = [*tss, *more.timestamps]
            ends.extend(_cumulative_sizes(more.keys, more.values, ends[-1]))
        # Cut at max_bytes (always at least one record, as Kafka does).
        n = len(values)
        if ends[-1] > max_bytes:
            n = min(n, bisect.bisect_left(ends, max_bytes) + 1)
            offsets, keys, values, tss = offsets[:n], keys[:n], values[:n], tss[:n]
        self._avg_size[key] = max(16, ends[n - 1] // n)
        data = encode_batch(offsets[0], offsets, keys, values, tss)
        more_at = offsets[n - 1] + 1 if offsets[n - 1] + 1 < nxt else None
        return FetchResult(E.NONE, nxt, earliest, data, more_at)

    def list_offset(self, info: TopicInfo, partition: int, timestamp: int) -> tuple[int, int, int]:
        """(error, timestamp, offset) for ListOffsets, as Kafka's broker answers for a log without
        tiered storage: latest (-1) the next offset; earliest (-2) and earliest local (-4) the
        earliest offset retention left (the whole log is local); max timestamp (-3) the first
        offset of the largest record timestamp (ms) with that timestamp; latest tiered (-5) and
        earliest pending upload (-6) offset -1 (nothing is tiered); else the first offset whose
        record timestamp (ms) is at or after ``timestamp``, with its timestamp. Offset -1 when
        no record qualifies."""
        if not 0 <= partition < info.partitions:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if timestamp in (V.LATEST_TIERED_TIMESTAMP, V.EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return E.NONE, -1, -1
        earliest, nxt = self.store.partition_watermarks(info, partition)
        if timestamp == V.LATEST_TIMESTAMP:
            return E.NONE, -1, nxt
        if timestamp in (V.EARLIEST_TIMESTAMP, V.EARLIEST_LOCAL_TIMESTAMP):
            return E.NONE, -1, earliest
        if timestamp == V.MAX_TIMESTAMP:
            found = self.store.offset_of_largest_timestamp(info, partition, 1_000_000)
        elif timestamp > _MAX_TIMESTAMP_MS:  # past every timestamp the log can hold
            found = None
        else:
            found = self.store.offset_for_time(info.name, partition, timestamp * 1_000_000)
        if found is None:
            return E.NONE, -1, -1
        return E.NONE, found[1] // 1_000_000, found[0]

    # -- produce -----------------------------------------------------------------------------

    def lock(self, topic: str, partition: int) -> asyncio.Lock:
        key = (topic, partition)
        lk = self._locks.get(key)
        if lk is None:
            lk = self._locks[key] = asyncio.Lock()
        return lk

    def _next_batch_id(self) -> int:
        self._last_batch_id = max(time.time_ns(), self._last_batch_id + 1)
        return self._last_batch_id

    def append_batches(self, info: TopicInfo, partition: int, batches: list[ProducedBatch]) -> ProduceResult:
        """Runs in a worker thread, under :meth:`lock` for the partition. Each batch is one
        :meth:`TopicStore.append_slices`: the sequence check of an idempotent producer, the
        records and the producer's new last sequence are one SQLite transaction."""
        store = self.store
        base = -1
        earliest: int | None = None
        for b in batches:
            if b.transactional:
                return ProduceResult(E.INVALID_REQUEST, -1, -1, "transactional producers are not supported")
            tss, vls = b.timestamps_ms, b.value_lengths
            if b.count and (top := int(tss.max())) > _MAX_TIMESTAMP_MS:
                return ProduceResult(E.INVALID_TIMESTAMP, -1, -1, f"timestamp {top} ms is out of range")
            append: Callable[[str, int, int | None], Appended]
            raw: bytes | None = None
            if b.storable and b.raw is not None:
                # kept as the producer framed it: a Fetch returns these bytes
                raw = b.raw
                if b.header is not None and b.header.max_ts != int(tss.max()):
                    raw = patch_batch(raw, 0, int(tss.max()))
            else:
                # offsets or timestamps to assign (records without one get now)
                if b.count and int(tss.min()) < 0:
                    tss = np.where(tss < 0, time.time_ns() // 1_000_000, tss)
                if b.raw is not None and b.count:
                    # framed anew: keys, values (null ones too) and headers as they came
                    try:
                        raw = reframe_batch(
                            b.data, b.count, tss.tolist(), (b.producer_id, b.producer_epoch, b.base_sequence)
                        )
                    except MalformedBatch as exc:
                        return ProduceResult(E.CORRUPT_MESSAGE, -1, -1, str(exc))
            if raw is not None:

                def append(writer: str, batch_id: int, after: int | None, raw: bytes = raw) -> Appended:
                    return store.append_batch(info, partition, writer, batch_id, raw, expect_after=after)

            else:
                # records given as lists (no headers): encoded from their slices
                if b.count and int(vls.min()) < 0:  # a null value is kept as an empty one
                    vls = np.maximum(vls, 0)
                recs = RecordSlices(b.data, b.key_starts, b.key_lengths, b.value_starts, vls, tss)

                def append(
                    writer: str, batch_id: int, after: int | None, recs: RecordSlices = recs
                ) -> Appended:
                    return store.append_slices(
                        info, partition, writer, batch_id, recs, 1_000_000, expect_after=after
                    )

            if b.producer_id >= 0:
                last_seq = b.base_sequence + b.count - 1
                res = append(f"kafka-producer-{b.producer_id}", last_seq, b.base_sequence - 1)
                earliest = res.earliest
                if not res.written and res.committed is not None:
                    if last_seq <= res.committed:
                        continue  # a retry of a batch already written: success, written once
                    return ProduceResult(
                        E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        -1,
                        -1,
                        f"sequence {b.base_sequence} after {res.committed} for producer {b.producer_id}",
                    )
            else:
                res = append("kafka-producer", self._next_batch_id(), None)
                earliest = res.earliest
            if base < 0:
                base = res.start
        if earliest is None:
            earliest, _ = store.partition_watermarks(info, partition)
        return ProduceResult(E.NONE, base, earliest)
