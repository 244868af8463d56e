"""The embedded partitioned topic log.

Layout, all under ``DB/topics/`` (the rest of the database directory belongs to the engine)::

    DB/topics/catalog.sqlite             topics (name -> id, partitions, retention) + group offsets
    DB/topics/<topic id>/<p>.sqlite      one file per partition: batches, writers, state
                                         (and records: rows of files written before batches)

Records are stored as Kafka record batches (``changefeed.topics.segments``): what a Kafka Fetch
returns is the stored bytes.

One SQLite file per partition lets several processes (Spark executor tasks) append to different
partitions of a topic truly in parallel. Files run in WAL mode with a busy timeout, so concurrent
writers wait instead of failing. Every write is durable before it returns, as the engine's commits
are (``CHANGEFEED_SYNCHRONOUS``, default FULL, see ``changefeed.sqlite_wal``): the file's WAL is
synced once for every commit waiting at that moment (group commit). And an append first makes the
database's own WAL durable (``changefeed.db``): whatever the appender read from the database before
appending (a feed's changes) is durable before the records that carry it can be, so a power loss
never leaves a delivered change whose transaction was lost.

Offsets start at 0, are consecutive within one :meth:`TopicStore.append`, and are never reused or
renumbered: the next offset lives in the partition's ``state`` row, so retention can delete every
record and the partition still continues where it was (the "offset skip" of the YDB spec).

Topic names are arbitrary printable strings (``orders/updates_feed``, ``t.family``); they never
appear in a path, only the catalog's integer id does (ids are never reused, even after a drop).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from changefeed.exceptions import DatabaseError, TopicError
from changefeed.sqlite_wal import durability, wal_sync
from changefeed.topics.batch import MalformedBatch, decode_batch
from changefeed.topics.files import (
    CATALOG_APP_ID,
    CATALOG_SCHEMA,
    PARTITION_APP_ID,
    PARTITION_SCHEMA,
    Conn,
    cached,
    connection,
    forget,
    guard,
    read_txn,
    sync_dir,
    write_txn,
)
from changefeed.topics.segments import (
    BLOB_READ_MIN,
    NS_PER_MS,
    Chunk,
    StoredBatches,
    encode_chunks,
    first_at_or_after,
    insert_chunks,
    largest_timestamp,
    read_stored,
    scan,
    watermarks,
)
from changefeed.topics.slices import Appended, RecordColumns, RecordSlices

__all__ = [
    "BLOB_READ_MIN",
    "DEFAULT_RETENTION_NS",
    "MAX_PARTITIONS",
    "RECORD_SCHEMA",
    "Appended",
    "Record",
    "RecordColumns",
    "RecordSlices",
    "TopicInfo",
    "TopicLog",
    "TopicStore",
]

#: YDB's default retention period: 24 hours.
DEFAULT_RETENTION_NS = 24 * 3600 * 1_000_000_000
MAX_PARTITIONS = 10_000
#: The Arrow schema of :meth:`TopicStore.read_arrow` and of ``records`` given to :meth:`TopicStore.append`
#: (``offset`` and ``write_time`` are only in what is read).
RECORD_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("write_time", pa.int64(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    id: int
    partitions: int
    retention_ns: int  #: 0 means records are kept forever
    created_ns: int


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    ts: int  #: commit timestamp of the change, ns
    write_time: int  #: when the record was appended to the topic, ns


@runtime_checkable
class TopicLog(Protocol):
    """The seam between producers/consumers and a topic log implementation."""

    def ensure_topic(self, name: str, partitions: int, retention_ns: int) -> TopicInfo: ...
    def drop_topic(self, name: str, missing_ok: bool = False) -> None: ...
    def topic(self, name: str) -> TopicInfo: ...
    def topics(self) -> list[TopicInfo]: ...
    def append(
        self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table | pa.RecordBatch
    ) -> int: ...
    def committed_batch(self, topic: str, partition: int, writer: str) -> int | None: ...
    def read(self, topic: str, partition: int, offset: int, max_records: int = 1000) -> list[Record]: ...
    def read_arrow(
        self, topic: str, partition: int, start_offset: int, end_offset: int | None = None
    ) -> pa.Table: ...
    def offsets(self, topic: str) -> dict[int, tuple[int, int]]: ...
    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None: ...
    def committed_offsets(self, group: str, topic: str) -> dict[int, int]: ...
    def apply_retention(self, now_ns: int | None = None) -> int: ...


#: The engine's file in the database directory (``changefeed.engine.database.DB_FILE``; the two
#: packages are one layer and do not import each other: tests/test_crash_durability.py checks they agree).
ENGINE_FILE = "changefeed.db"


def _column_pylist(records: pa.Table | pa.RecordBatch, name: str, binary: bool) -> list[Any]:
    if name not in records.schema.names:
        if name == "key":
            return [None] * records.num_rows
        raise TopicError(f"records to append need a {name!r} column")
    col = records.column(name)
    t = col.type
    if binary:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            col = col.cast(pa.binary())
        elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_null(t)):
            raise TopicError(f"records column {name!r} must be binary, not {t}")
    elif not pa.types.is_integer(t):
        raise TopicError(f"records column {name!r} must be an integer (ns), not {t}")
    return col.to_pylist()  # type: ignore[no-any-return]


_END = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------


class TopicStore:
    """The embedded topic log of one database directory. Picklable: holds only the path."""

    def __init__(
        self,
        db_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], int] = time.time_ns,
        mmap_bytes: int = 0,
    ) -> None:
        """``mmap_bytes`` > 0: partition files are read through a memory mapping of up to that
        many bytes each (SQLite's ``PRAGMA mmap_size``) instead of ``read()`` calls into SQLite's
        page cache; for a reader that serves the stored batches over and over (the Kafka
        endpoint). The setting belongs to the connection, which every TopicStore of the process
        shares: it changes how pages are read, never what is read."""
        if isinstance(mmap_bytes, bool) or not isinstance(mmap_bytes, int) or mmap_bytes < 0:
            raise TopicError(f"mmap_bytes must be a non-negative integer, got {mmap_bytes!r}")
        self.db_dir = Path(db_dir).absolute()
        self.root = self.db_dir / "topics"
        self._clock = clock
        self._mmap_bytes = mmap_bytes
        self._paths: dict[tuple[int, int], str] = {}  #: partition file paths by (topic id, partition)
        self._mapped: dict[str, Conn] = {}  #: connections given ``mmap_bytes``, by path

    def __repr__(self) -> str:
        return f"TopicStore({str(self.db_dir)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"db_dir": self.db_dir, "clock": self._clock, "mmap_bytes": self._mmap_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["db_dir"], clock=state["clock"], mmap_bytes=state.get("mmap_bytes", 0))  # type: ignore[misc]

    def close(self) -> None:
        """Close this process's cached connections to this database's topic files (they reopen
        lazily on next use). They are shared by every TopicStore of the process: a program that
        reads or writes topics from several threads (a node's endpoints and its pipeline) must
        not close them while another thread may use them."""
        forget(str(self.root) + os.sep)

    # -- files -------------------------------------------------------------------------------

    def _check_db_dir(self) -> None:
        if not self.db_dir.is_dir():
            raise DatabaseError(f"database directory {str(self.db_dir)!r} does not exist")

    def _catalog(self, create: bool) -> Conn | None:
        path = self.root / "catalog.sqlite"
        if not path.exists():
            if not create:
                self._check_db_dir()
                return None
            if not self.root.is_dir():
                self.root.mkdir(parents=True, exist_ok=True)
                sync_dir(self.db_dir)
        return connection(str(path), CATALOG_APP_ID, CATALOG_SCHEMA)

    def _partition_path(self, info: TopicInfo, partition: int) -> str:
        key = (info.id, partition)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = str(self.root / str(info.id) / f"{partition}.sqlite")
        return path

    def _partition(self, info: TopicInfo, partition: int) -> tuple[Conn, str]:
        if not isinstance(partition, int) or not 0 <= partition < info.partitions:
            raise TopicError(
                f"partition {partition} out of range for topic {info.name!r} "
                f"(partitions 0..{info.partitions - 1})"
            )
        path = self._partition_path(info, partition)
        c = cached(path)
        if c is None:  # else open already: no stat per call
            if not os.path.exists(path):
                folder = os.path.dirname(path)
                if not os.path.isdir(folder):
                    os.makedirs(folder, exist_ok=True)
                    sync_dir(self.root)
            c = connection(path, PARTITION_APP_ID, PARTITION_SCHEMA)
        if self._mmap_bytes and self._mapped.get(path) is not c:
            with guard(path), c.lock:
                c.conn.execute(f"PRAGMA mmap_size={self._mmap_bytes}")
            self._mapped[path] = c
        return c, path

    def _source_barrier(self) -> None:
        """Before an append: make every commit already in the database's WAL durable, so records
        derived from what the appender read never outlive the commits they carry."""
        if durability().group_commit and (self.db_dir / ENGINE_FILE).exists():
            wal_sync(self.db_dir / ENGINE_FILE).barrier()

    # -- topics ------------------------------------------------------------------------------

    @staticmethod
    def _check_name(name: str) -> None:
        if not isinstance(name, str) or not name or not name.isprintable():
            raise TopicError(f"invalid topic name {name!r}: must be a non-empty printable string")

    def ensure_topic(self, name: str, partitions: int, retention_ns: int = DEFAULT_RETENTION_NS) -> TopicInfo:
        """Create the topic if missing (idempotent). Updates the retention of an existing topic;
        a different partition count is an error (only :meth:`add_partitions` grows a topic)."""
        self._check_name(name)
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= MAX_PARTITIONS
        ):
            raise TopicError(
                f"topic {name!r}: partitions must be an integer in 1..{MAX_PARTITIONS}, got {partitions!r}"
            )
        if isinstance(retention_ns, bool) or not isinstance(retention_ns, int) or retention_ns < 0:
            raise TopicError(
                f"topic {name!r}: retention must be a non-negative number of ns, got {retention_ns!r}"
            )
        cat = self._catalog(create=True)
        assert cat is not None
        path = str(self.root / "catalog.sqlite")
        with guard(path), write_txn(cat) as conn:
            row = conn.execute(
                "SELECT id, partitions, retention_ns, created_ns FROM topics WHERE name = ?", (name,)
            ).fetchone()
            if row is not None:
                if row[1] != partitions:
                    raise TopicError(
                        f"topic {name!r} already exists with {row[1]} partitions, not {partitions}"
                    )
                if row[2] != retention_ns:
                    conn.execute("UPDATE topics SET retention_ns = ? WHERE id = ?", (retention_ns, row[0]))
                info = TopicInfo(name, row[0], partitions, retention_ns, row[3])
            else:
                created = self._clock()
                cur = conn.execute(
                    "INSERT INTO topics (name, partitions, retention_ns, created_ns) VALUES (?, ?, ?, ?)",
                    (name, partitions, retention_ns, created),
                )
                assert cur.lastrowid is not None
                info = TopicInfo(name, cur.lastrowid, partitions, retention_ns, created)
                # Create the partition files while holding the catalog lock: no reader sees a
                # topic whose files are half made.
                for p in range(partitions):
                    self._partition(info, p)
        return info

    def set_retention(self, name: str, retention_ns: int) -> TopicInfo:
        """Change the topic's retention (0: records are kept forever), durably: the next
        :meth:`apply_retention` applies it, in every process."""
        if isinstance(retention_ns, bool) or not isinstance(retention_ns, int) or retention_ns < 0:
            raise TopicError(
                f"topic {name!r}: retention must be a non-negative number of ns, got {retention_ns!r}"
            )
        cat = self._catalog(create=False)
        if cat is None:
            raise TopicError(f"topic {name!r} does not exist")
        with guard(str(self.root / "catalog.sqlite")), write_txn(cat) as conn:
            row = conn.execute(
                "UPDATE topics SET retention_ns = ? WHERE name = ? RETURNING id, partitions, created_ns",
                (retention_ns, name),
            ).fetchone()
        if row is None:
            raise TopicError(f"topic {name!r} does not exist")
        return TopicInfo(name, row[0], row[1], retention_ns, row[2])

    def add_partitions(self, name: str, partitions: int) -> TopicInfo:
        """Grow the topic to ``partitions`` partitions, durably. The new partitions start empty
        at offset 0; the existing ones, their records and offsets and every group's committed
        offsets stay as they are. A topic never shrinks: ``partitions`` must be more than it
        has (and at most :data:`MAX_PARTITIONS`)."""
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions > MAX_PARTITIONS:
            raise TopicError(
                f"topic {name!r}: partitions must be an integer in 1..{MAX_PARTITIONS}, got {partitions!r}"
            )
        cat = self._catalog(create=False)
        if cat is None:
            raise TopicError(f"topic {name!r} does not exist")
        with guard(str(self.root / "catalog.sqlite")), write_txn(cat) as conn:
            row = conn.execute(
                "SELECT id, partitions, retention_ns, created_ns FROM topics WHERE name = ?", (name,)
            ).fetchone()
            if row is None:
                raise TopicError(f"topic {name!r} does not exist")
            if partitions <= row[1]:
                raise TopicError(
                    f"topic {name!r} has {row[1]} partition(s); {partitions} would not be an increase"
                )
            conn.execute("UPDATE topics SET partitions = ? WHERE id = ?", (partitions, row[0]))
            info = TopicInfo(name, row[0], partitions, row[2], row[3])
            # The new partition files are made (and their folder entries synced) before the
            # catalog commits: no reader sees a partition whose file is half made. A crash before
            # the commit leaves empty files that the next growth takes over.
            for p in range(row[1], partitions):
                self._partition(info, p)
            sync_dir(self.root / str(info.id))
        return info

    def drop_topic(self, name: str, missing_ok: bool = False) -> None:
        """Remove the topic, its group offsets and its files. Processes still holding a cached
        connection to a dropped partition file write into the void; ids are never reused."""
        cat = self._catalog(create=False)
        if cat is None:
            if missing_ok:
                return
            raise TopicError(f"topic {name!r} does not exist")
        path = str(self.root / "catalog.sqlite")
        with guard(path), write_txn(cat) as conn:
            row = conn.execute("SELECT id FROM topics WHERE name = ?", (name,)).fetchone()
            if row is None:
                if missing_ok:
                    return
                raise TopicError(f"topic {name!r} does not exist")
            conn.execute("DELETE FROM topics WHERE id = ?", (row[0],))
            conn.execute("DELETE FROM group_offsets WHERE topic_id = ?", (row[0],))
        topic_dir = self.root / str(row[0])
        forget(str(topic_dir) + os.sep)
        shutil.rmtree(topic_dir, ignore_errors=True)

    def topic(self, name: str) -> TopicInfo:
        cat = self._catalog(create=False)
        row = None
        if cat is not None:
            with guard(str(self.root / "catalog.sqlite")), cat.lock:
                row = cat.conn.execute(
                    "SELECT id, partitions, retention_ns, created_ns FROM topics WHERE name = ?", (name,)
                ).fetchone()
        if row is None:
            raise TopicError(f"topic {name!r} does not exist")
        return TopicInfo(name, row[0], row[1], row[2], row[3])

    def topics(self) -> list[TopicInfo]:
        cat = self._catalog(create=False)
        if cat is None:
            return []
        with guard(str(self.root / "catalog.sqlite")), cat.lock:
            rows = cat.conn.execute(
                "SELECT name, id, partitions, retention_ns, created_ns FROM topics ORDER BY name"
            ).fetchall()
        return [TopicInfo(*r) for r in rows]

    # -- records -----------------------------------------------------------------------------

    def append(
        self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table | pa.RecordBatch
    ) -> int:
        """Append ``records`` (columns key, value, ts) with consecutive offsets, atomically and
        idempotently: if ``writer`` already committed ``batch_id`` (or a later one) nothing is
        written and 0 is returned. Returns the number of records written."""
        if not isinstance(writer, str) or not writer:
            raise TopicError(f"invalid writer id {writer!r}: must be a non-empty string")
        if isinstance(batch_id, bool) or not isinstance(batch_id, int):
            raise TopicError(f"batch id must be an integer, got {batch_id!r}")
        info = self.topic(topic)
        keys = _column_pylist(records, "key", binary=True)
        values = _column_pylist(records, "value", binary=True)
        tss = _column_pylist(records, "ts", binary=False)
        return self.append_lists(info, partition, writer, batch_id, keys, values, tss)[1]

    def append_lists(
        self,
        info: TopicInfo,
        partition: int,
        writer: str,
        batch_id: int,
        keys: list[bytes | None],
        values: list[bytes],
        tss: list[int],
        ts_unit_ns: int = 1,
    ) -> tuple[int, int]:
        """:meth:`append` from Python lists; returns (first offset written, number written).
        Timestamps are in units of ``ts_unit_ns`` nanoseconds (the caller keeps them within
        int64 ns)."""
        n = len(values)
        if n and (None in values or None in tss):
            raise TopicError(f"topic {info.name!r}: record value and ts must not be null")
        if ts_unit_ns != 1:
            tss = [t * ts_unit_ns for t in tss]
        res = self._append(info, partition, writer, batch_id, n, lambda: encode_chunks(keys, values, tss))
        return res.start, res.written

    def append_slices(
        self,
        info: TopicInfo,
        partition: int,
        writer: str,
        batch_id: int,
        records: RecordSlices,
        ts_unit_ns: int = 1,
        *,
        expect_after: int | None = None,
    ) -> Appended:
        """:meth:`append_lists` of records sliced from one buffer, in one transaction that also
        reads the writer's committed batch and the partition's earliest offset. Nothing is
        written if the writer already committed ``batch_id`` or a later one, nor, when
        ``expect_after`` is given, if the writer's committed batch is another one than
        ``expect_after`` (an idempotent producer's sequence gap); :attr:`Appended.committed`
        tells the two apart."""
        n = len(records)
        if n and (
            int(records.value_lengths.min()) < 0
            or int(records.key_lengths.min()) < -1
            or int(records.key_starts.min()) < 0
            or int(records.value_starts.min()) < 0
            or int((records.key_starts + np.maximum(records.key_lengths, 0)).max()) > len(records.data)
            or int((records.value_starts + records.value_lengths).max()) > len(records.data)
        ):
            raise TopicError(f"topic {info.name!r}: record slices outside their buffer or null values")
        tss = (records.timestamps * ts_unit_ns).tolist()
        return self._append(
            info,
            partition,
            writer,
            batch_id,
            n,
            lambda: encode_chunks(records.keys, records.values, tss),
            expect_after=expect_after,
        )

    def append_batch(
        self,
        info: TopicInfo,
        partition: int,
        writer: str,
        batch_id: int,
        batch: bytes,
        *,
        expect_after: int | None = None,
    ) -> Appended:
        """:meth:`append_slices` of one Kafka record batch (magic 2, compressed with any of Kafka's codecs or not), kept
        as it is: only its base offset is set. Its records' offset deltas must be 0..count-1,
        every record timestamped and its max timestamp theirs (the Kafka endpoint re-encodes a
        batch that is not so)."""
        try:
            rec = decode_batch(batch)
        except MalformedBatch as exc:
            raise TopicError(f"topic {info.name!r}: {exc}") from None
        h = rec.header
        n = h.count
        ts = rec.timestamps_ms
        if (
            n < 1
            or h.size != len(batch)
            or h.last_offset_delta != n - 1
            or not bool((rec.offset_deltas == np.arange(n, dtype=np.int64)).all())
            or int(ts.min()) < 0
            or int(ts.max()) != h.max_ts
        ):
            raise TopicError(
                f"topic {info.name!r}: a batch kept as it is needs offset deltas 0..n-1, "
                "timestamps and its max timestamp"
            )
        chunk = Chunk(n, h.max_ts * NS_PER_MS, None, batch)
        return self._append(info, partition, writer, batch_id, n, lambda: [chunk], expect_after=expect_after)

    def _append(
        self,
        info: TopicInfo,
        partition: int,
        writer: str,
        batch_id: int,
        n: int,
        encode: Callable[[], list[Chunk]],
        *,
        expect_after: int | None = None,
    ) -> Appended:
        """Store the ``n`` records ``encode`` makes (encoded before the file is locked) and the
        writer's batch id in one durable transaction."""
        chunks = encode()
        c, path = self._partition(info, partition)
        now = self._clock()
        self._source_barrier()
        with guard(path), write_txn(c) as conn:
            start = int(conn.execute("SELECT next_offset FROM state WHERE id = 0").fetchone()[0])
            row = conn.execute("SELECT batch FROM writers WHERE writer = ?", (writer,)).fetchone()
            committed = None if row is None else int(row[0])
            if committed is not None and (committed >= batch_id or expect_after not in (None, committed)):
                written = 0
            else:
                written = n
                if n:
                    insert_chunks(conn, start, chunks, now)
                    conn.execute("UPDATE state SET next_offset = ? WHERE id = 0", (start + n,))
                conn.execute(
                    "INSERT INTO writers (writer, batch) VALUES (?, ?) "
                    "ON CONFLICT (writer) DO UPDATE SET batch = excluded.batch",
                    (writer, batch_id),
                )
            earliest = watermarks(conn)[0]
        return Appended(start, written, earliest, committed)

    def committed_batch(self, topic: str, partition: int, writer: str) -> int | None:
        c, path = self._partition(self.topic(topic), partition)
        with guard(path), c.lock:
            row = c.conn.execute("SELECT batch FROM writers WHERE writer = ?", (writer,)).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _check_offset(offset: int) -> None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise TopicError(f"offset must be a non-negative integer, got {offset!r}")

    def read(self, topic: str, partition: int, offset: int, max_records: int = 1000) -> list[Record]:
        """Up to ``max_records`` records with offset >= ``offset``, ascending. Offsets deleted by
        retention are simply skipped."""
        self._check_offset(offset)
        c, path = self._partition(self.topic(topic), partition)
        with guard(path), read_txn(c) as conn:
            r = scan(conn, path, offset, _END, max(0, max_records))
        return [
            Record(topic, partition, *row)
            for row in zip(r.offsets, r.keys, r.values, r.timestamps, r.write_times, strict=True)
        ]

    def read_arrow(
        self, topic: str, partition: int, start_offset: int, end_offset: int | None = None
    ) -> pa.Table:
        """Records with ``start_offset <= offset < end_offset`` (to the end if None) as an Arrow
        table of :data:`RECORD_SCHEMA`."""
        self._check_offset(start_offset)
        c, path = self._partition(self.topic(topic), partition)
        end = _END if end_offset is None else end_offset
        with guard(path), read_txn(c) as conn:
            r = scan(conn, path, start_offset, end, _END)
        if not r.offsets:
            return RECORD_SCHEMA.empty_table()
        cols = (r.offsets, r.keys, r.values, r.timestamps, r.write_times)
        return pa.Table.from_arrays(
            [pa.array(col, type=field.type) for col, field in zip(cols, RECORD_SCHEMA, strict=True)],
            schema=RECORD_SCHEMA,
        )

    # -- for the Kafka endpoint (changefeed.server.kafka) -----------------------------------

    def read_columns(
        self, info: TopicInfo, partition: int, offset: int, max_records: int, ts_unit_ns: int = 1
    ) -> RecordColumns:
        """Up to ``max_records`` records with offset >= ``offset`` of one partition, column-wise,
        with the partition's earliest and next offset, in one read transaction. Timestamps are
        floor-divided by ``ts_unit_ns``. Offsets are consecutive unless retention left a gap."""
        c, path = self._partition(info, partition)
        with guard(path), read_txn(c) as conn:
            earliest, nxt = watermarks(conn)
            r = scan(conn, path, max(offset, earliest), nxt, max(0, max_records))
        tss = r.timestamps
        if ts_unit_ns != 1 and tss:
            tss = (np.asarray(tss, dtype=np.int64) // ts_unit_ns).tolist()
        return RecordColumns(earliest, nxt, r.offsets, r.keys, r.values, tss)

    def read_batches(self, info: TopicInfo, partition: int, offset: int, max_bytes: int) -> StoredBatches:
        """The stored batches from the one holding ``offset`` on, as many whole batches as fit
        in ``max_bytes`` (the first always), with the partition's watermarks, in one read
        transaction: what a Kafka Fetch returns. Where ``offset`` falls in records of the old
        row format, :attr:`StoredBatches.rows` is set and no batch is read (see
        :meth:`read_columns`)."""
        c, path = self._partition(info, partition)
        with guard(path), read_txn(c) as conn:
            return read_stored(conn, offset, max_bytes)

    def offset_for_time(self, topic: str, partition: int, ts_ns: int) -> tuple[int, int] | None:
        """(offset, ts) of the first record with ts >= ``ts_ns``, or None."""
        c, path = self._partition(self.topic(topic), partition)
        with guard(path), read_txn(c) as conn:
            return first_at_or_after(conn, path, ts_ns)

    def offset_of_largest_timestamp(
        self, info: TopicInfo, partition: int, unit_ns: int = 1
    ) -> tuple[int, int] | None:
        """(offset, ts) of the record with the largest timestamp (the first of them, counting
        timestamps in units of ``unit_ns``: Kafka's max timestamp is in ms), or None when the
        partition holds no record (retention may have removed them all)."""
        c, path = self._partition(info, partition)
        with guard(path), read_txn(c) as conn:
            return largest_timestamp(conn, path, unit_ns)

    def partition_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(earliest available offset, next offset) of one partition."""
        c, path = self._partition(self.topic(topic), partition)
        return self._offsets(c, path)

    def partition_watermarks(self, info: TopicInfo, partition: int) -> tuple[int, int]:
        """:meth:`partition_offsets` of a topic already looked up."""
        return self._offsets(*self._partition(info, partition))

    @staticmethod
    def _offsets(c: Conn, path: str) -> tuple[int, int]:
        with guard(path), c.lock:
            return watermarks(c.conn)

    def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """partition -> (earliest available offset, next offset)."""
        info = self.topic(topic)
        return {p: self._offsets(*self._partition(info, p)) for p in range(info.partitions)}

    # -- consumer groups ---------------------------------------------------------------------

    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Record, per partition, the next offset ``group`` will read."""
        if not isinstance(group, str) or not group:
            raise TopicError(f"invalid consumer group {group!r}: must be a non-empty string")
        info = self.topic(topic)
        for p, off in offsets.items():
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < info.partitions:
                raise TopicError(
                    f"partition {p} out of range for topic {topic!r} (partitions 0..{info.partitions - 1})"
                )
            self._check_offset(off)
        cat = self._catalog(create=True)
        assert cat is not None
        now = self._clock()
        with guard(str(self.root / "catalog.sqlite")), write_txn(cat) as conn:
            conn.executemany(
                "INSERT INTO group_offsets (grp, topic_id, partition, next_offset, updated_ns) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (grp, topic_id, partition) DO UPDATE SET "
                "next_offset = excluded.next_offset, updated_ns = excluded.updated_ns",
                [(group, info.id, p, off, now) for p, off in offsets.items()],
            )

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        info = self.topic(topic)
        cat = self._catalog(create=False)
        assert cat is not None
        with guard(str(self.root / "catalog.sqlite")), cat.lock:
            rows = cat.conn.execute(
                "SELECT partition, next_offset FROM group_offsets WHERE grp = ? AND topic_id = ? "
                "ORDER BY partition",
                (group, info.id),
            ).fetchall()
        return {int(p): int(o) for p, o in rows}

    def groups(self) -> list[str]:
        """Every consumer group with a committed offset, by name."""
        cat = self._catalog(create=False)
        if cat is None:
            return []
        with guard(str(self.root / "catalog.sqlite")), cat.lock:
            rows = cat.conn.execute("SELECT DISTINCT grp FROM group_offsets ORDER BY grp").fetchall()
        return [str(r[0]) for r in rows]

    def group_offsets(self, group: str) -> dict[str, dict[int, int]]:
        """topic -> partition -> next offset, for every offset ``group`` committed."""
        cat = self._catalog(create=False)
        if cat is None:
            return {}
        with guard(str(self.root / "catalog.sqlite")), cat.lock:
            rows = cat.conn.execute(
                "SELECT t.name, g.partition, g.next_offset FROM group_offsets g "
                "JOIN topics t ON t.id = g.topic_id WHERE g.grp = ? ORDER BY t.name, g.partition",
                (group,),
            ).fetchall()
        out: dict[str, dict[int, int]] = {}
        for name, p, off in rows:
            out.setdefault(str(name), {})[int(p)] = int(off)
        return out

    def delete_group_offsets(
        self, group: str, topic: str | None = None, partitions: Iterable[int] | None = None
    ) -> int:
        """Forget ``group``'s committed offsets: all of them, one topic's, or some partitions'
        of one topic. Returns how many were removed."""
        cat = self._catalog(create=False)
        if cat is None:
            return 0
        sql, args = "DELETE FROM group_offsets WHERE grp = ?", list[object]([group])
        if topic is not None:
            sql += " AND topic_id = (SELECT id FROM topics WHERE name = ?)"
            args.append(topic)
            if partitions is not None:
                parts = sorted(set(partitions))
                sql += f" AND partition IN ({', '.join('?' * len(parts))})" if parts else " AND 0"
                args.extend(parts)
        with guard(str(self.root / "catalog.sqlite")), write_txn(cat) as conn:
            return int(conn.execute(sql, args).rowcount)

    # -- retention ---------------------------------------------------------------------------

    def apply_retention(self, now_ns: int | None = None) -> int:
        """Delete every record whose ``write_time + retention < now``, read or not. Offsets are
        never renumbered, so consumers see an offset skip. Returns the number deleted."""
        now = self._clock() if now_ns is None else now_ns
        deleted = 0
        for info in self.topics():
            if info.retention_ns <= 0:
                continue
            cutoff = now - info.retention_ns
            for p in range(info.partitions):
                c, path = self._partition(info, p)
                with guard(path), write_txn(c) as conn:
                    deleted += conn.execute("DELETE FROM records WHERE write_time < ?", (cutoff,)).rowcount
                    for base, last in conn.execute(
                        "DELETE FROM batches WHERE write_time < ? RETURNING base_offset, last_offset",
                        (cutoff,),
                    ).fetchall():
                        deleted += last - base + 1
        return deleted
