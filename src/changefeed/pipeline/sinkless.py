"""Core (sinkless) CockroachDB changefeeds: ``EXPERIMENTAL CHANGEFEED FOR t[, ..]`` and
``CREATE CHANGEFEED FOR ..`` without ``INTO``, streamed to the client as they commit.

A plain-Python loop, no Spark: it starts at once and delivers a commit within one poll.

1. **Plan** (:class:`CorePlan`, made by :mod:`changefeed.sql.statements.crdb_feeds` inside the
   statement's transaction): the target tables, the options, the start point ``S`` (the
   statement's timestamp, or ``cursor``) and each table's change-stream position at ``S``.
2. **Initial scan** (``initial_scan='yes'``, the default without ``cursor``): every table as it was
   at ``S`` (the same reconstruction as the Spark scan, :func:`changefeed.pipeline.snapshot.chunks.read_chunk_batches`:
   current rows, with later changes undone through their old images), ``updated`` = ``S``.
3. **Changes**: each poll reads, in one SQLite read transaction, the change streams ``x<id>`` of
   every target past its position, merges them in commit order (``(ts, logical)``), encodes them
   with ``crdb-json`` and yields them. Every key's messages follow its transactions' order; a
   transaction's net change to a key is one message.
4. **Resolved** (``resolved``): commits take their timestamps in commit order, so after a poll
   that read everything its snapshot shows, the commit clock's reading ``R`` in that snapshot is
   a frontier: ``{"resolved":"R"}`` follows, and nothing at or below ``R`` comes after it. When
   a resolved message is due the loop first commits an empty transaction, so ``R`` advances on an
   idle database too.
5. **End**: at ``end_time`` (everything before it delivered), after the scan with
   ``initial_scan_only``, or when the consumer closes the iterator (which releases the read
   connection at once).

Messages are ``(table, key, value)``: the topic name (``None`` for resolved messages), the key
bytes (``None`` for resolved messages) and the value bytes (empty for ``key_only`` and for
``row``-envelope deletes).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import read_changes
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import ChangefeedFailed, UndefinedTable
from changefeed.feeds.cdc_plan import CdcQuery
from changefeed.feeds.crdb_options import (
    FORMAT_AVRO,
    FORMAT_CSV,
    FORMAT_JSON,
    INITIAL_SCAN_NO,
    SCHEMA_CHANGE_POLICY_BACKFILL,
    SCHEMA_CHANGE_POLICY_IGNORE,
    SCHEMA_CHANGE_POLICY_STOP,
    CrdbOptions,
    triggers_backfill,
)
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats.base import get_encoder
from changefeed.formats.crdb_json import CrdbJsonEncoder, family_rows, topic_of

if TYPE_CHECKING:
    from changefeed.engine.database import Database

#: A core changefeed message: (table, key, value); resolved messages have table and key None.
Message = tuple[str | None, bytes | None, bytes]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Messages that arrive together: one table's encoded batch (keys and values as Arrow binary
    arrays), or one resolved message (``table`` and ``keys`` None)."""

    table: str | None
    keys: pa.Array | None
    values: pa.Array

    def messages(self) -> list[Message]:
        values: list[bytes] = self.values.to_pylist()
        if self.keys is None:
            return [(None, None, v) for v in values]
        table = self.table
        return [(table, k, v) for k, v in zip(self.keys.to_pylist(), values, strict=True)]


#: How often the change streams are polled (a commit reaches the client within one poll).
POLL_S = 0.02
#: Change rows read per table and poll (bounds memory; a poll never emits past the cut).
POLL_ROWS = 50_000
#: The encoder of each ``format``.
ENCODERS = {FORMAT_JSON: "crdb-json", FORMAT_AVRO: "crdb-avro", FORMAT_CSV: "crdb-csv"}
#: Spacing of resolved messages when ``resolved`` has no value (emit as the frontier advances).
DEFAULT_RESOLVED_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class CorePlan:
    """What a core changefeed streams, fixed by its statement."""

    db_path: Path
    tables: tuple[TableSchema, ...]
    options: CrdbOptions
    start: CommitTs  # the scan snapshot and the lower bound of the changes (exclusive)
    start_seqs: tuple[int, ...]  # each table's change-stream position at ``start``
    notices: tuple[str, ...] = field(default=())
    #: per table, the column families whose messages it emits (one message per family, topic
    #: ``table.family``), or () for whole rows
    families: tuple[tuple[str, ...], ...] = field(default=())
    #: a CDC query (``CREATE CHANGEFEED AS SELECT``) over the one target table
    query: CdcQuery | None = None

    def families_of(self, index: int) -> tuple[str, ...]:
        return self.families[index] if self.families else ()

    def feed(self, table: TableSchema, seq: int) -> FeedSpec:
        """The FeedSpec that drives the encoder (and the scan) for one target table."""
        return FeedSpec(
            id=0,
            table_id=table.id,
            name="core",
            kind="crdb",
            topic=topic_of(table, self.options),
            partitions=1,
            format=ENCODERS[self.options.format],
            mode=Mode.NEW_AND_OLD_IMAGES,
            initial_scan=self.options.initial_scan != INITIAL_SCAN_NO,
            created_seq=seq,
            created_wall=self.start.wall,
            created_logical=self.start.logical,
            crdb=self.options,
            query=self.query,
        )


class CoreChangefeed:
    """An iterator of core changefeed messages; ``close()`` (or closing the iterator) cancels it.

    ``db`` is the client's database handle: the loop writes to it only to close a timestamp for
    a resolved message or for ``end_time``; everything else is read through its own read-only
    SQLite connection, opened on the first ``next()`` and closed when the feed ends."""

    def __init__(self, db: Database, plan: CorePlan, *, poll_s: float = POLL_S) -> None:
        self.db = db
        self.plan = plan
        self.poll_s = poll_s
        self.encoder = get_encoder(ENCODERS[plan.options.format])
        self.encoder_json = CrdbJsonEncoder()
        self._cancelled = threading.Event()
        self._batches = self._run()
        self._gen = (m for chunk in self._batches for m in chunk.messages())

    def __iter__(self) -> Iterator[Message]:
        return self

    def __next__(self) -> Message:
        return next(self._gen)

    def batches(self) -> Iterator[Chunk]:
        """The messages in the groups they arrive in (one encoded batch, or one resolved message):
        a consumer that writes a group at once and flushes after it loses no latency."""
        return self._batches

    def close(self) -> None:
        """End the changefeed from the thread that iterates it, releasing its connection."""
        self._gen.close()
        self._batches.close()

    def cancel(self) -> None:
        """End the changefeed from any thread: the loop stops within one poll interval, even on an
        idle table, and the iterating thread then sees the end of the messages."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def __enter__(self) -> CoreChangefeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop
    def _run(self) -> Generator[Chunk, None, None]:
        plan, opts = self.plan, self.plan.options
        if opts.initial_scan != INITIAL_SCAN_NO:
            yield from self._scan()
            if opts.initial_scan_only:
                return
        rc = open_sqlite(plan.db_path / DB_FILE, readonly=True)
        try:
            yield from self._stream(rc)
        finally:
            rc.close()

    def _scan(self) -> Iterator[Chunk]:
        from changefeed.pipeline.snapshot.chunks import read_chunk_batches

        plan = self.plan
        for i, (table, seq) in enumerate(zip(plan.tables, plan.start_seqs, strict=True)):
            feed = plan.feed(table, seq)
            for batch in read_chunk_batches(str(plan.db_path), table, feed, [], 0):
                if self._cancelled.is_set():
                    return
                yield from self._messages(batch, table, feed, plan.families_of(i))

    def _messages(
        self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, fams: tuple[str, ...] = ()
    ) -> Iterator[Chunk]:
        encode_arrow = getattr(self.encoder, "encode_arrow", None)
        if fams:  # split_column_families / FAMILY targets: one message per family (JSON)
            for family in fams:
                rows = batch.filter(family_rows(batch, table, family))
                if rows.num_rows:
                    keys, values = self.encoder_json.encode_arrow(rows, table, feed, family)
                    yield Chunk(f"{feed.topic}.{family}", keys, values)
            return
        if encode_arrow is not None:
            keys, values = encode_arrow(batch, table, feed)
            yield Chunk(feed.topic, keys, values)
            return
        records = self.encoder.encode_python(batch, table, feed)
        keys = pa.array([k for _, k, _, _ in records], pa.binary())
        yield Chunk(feed.topic, keys, pa.array([v for _, _, v, _ in records], pa.binary()))

    def _stream(self, rc: sqlite3.Connection) -> Iterator[Chunk]:
        plan, opts = self.plan, self.plan.options
        tables = list(plan.tables)
        feeds = [plan.feed(t, s) for t, s in zip(tables, plan.start_seqs, strict=True)]
        positions = list(plan.start_seqs)
        end = opts.end_time
        interval = opts.resolved_interval_ns(core=True) or DEFAULT_RESOLVED_NS
        last_resolved = plan.start
        next_resolved = time.monotonic() + interval / 1e9 if opts.resolved else None
        version = None
        while not self._cancelled.is_set():
            closed: CommitTs | None = None
            now = time.monotonic()
            finishing = end is not None and self.db.clock.now_ns() >= end.wall
            if finishing or (next_resolved is not None and now >= next_resolved):
                closed, _ = self.db.close_timestamp()  # every commit <= closed is visible from now on
            data_version = rc.execute("PRAGMA data_version").fetchone()[0]
            if closed is None and data_version == version:
                self._cancelled.wait(self.poll_s)
                continue
            version = data_version
            rc.execute("BEGIN")
            try:
                previous = tables
                tables = self._refresh(rc, tables)
                feeds = [replace(f, topic=topic_of(t, opts)) for f, t in zip(feeds, tables, strict=True)]
                batches, complete = self._read(rc, tables, positions)
                # Every commit visible in this snapshot is at or below the clock's last reading,
                # and every later one above it: once all is read, that is the frontier.
                wall, logical = rc.execute("SELECT wall, logical FROM _clock WHERE id = 0").fetchone()
                frontier = CommitTs(int(wall), int(logical))
            finally:
                rc.execute("COMMIT")
            for i, batch in self._merge(batches, end):
                yield from self._messages(batch, tables[i], feeds[i], plan.families_of(i))
            for i, (old, new) in enumerate(zip(previous, tables, strict=True)):
                if old.version != new.version:
                    yield from self._schema_change(old, new, feeds[i], positions[i], frontier)
            if not complete:
                continue  # more to read at once
            if closed is not None:
                if opts.resolved and frontier > last_resolved:
                    stamp = frontier if end is None or frontier < end else end
                    if stamp > last_resolved:
                        payload = self.encoder.resolved(stamp, 0, feeds[0])
                        yield Chunk(None, None, pa.array([payload], pa.binary()))
                        last_resolved = stamp
                    next_resolved = time.monotonic() + interval / 1e9
                if finishing and end is not None and frontier >= end:
                    return

    def _schema_change(
        self, old: TableSchema, new: TableSchema, feed: FeedSpec, seq: int, at: CommitTs
    ) -> Iterator[Chunk]:
        """A target's schema changed (seen at ``at``): ``schema_change_policy`` says what follows.

        ``backfill`` re-emits every row in the old schema (the duplicates) and then in the new one;
        ``nobackfill`` only the duplicates; ``stop`` ends the changefeed with CockroachDB's error;
        ``ignore``, or a change that needs no backfill, nothing. Under the ``default`` events a
        backfill follows adding a column with a default or a stored computed value, and dropping a
        column; under ``column_changes`` any added or dropped column."""
        opts = self.plan.options
        if not triggers_backfill(old, new, opts):
            return
        policy = opts.schema_change_policy
        if policy == SCHEMA_CHANGE_POLICY_IGNORE:
            return
        if policy == SCHEMA_CHANGE_POLICY_STOP:
            raise ChangefeedFailed(
                'shut down due to schema change and schema_change_policy="stop": '
                f"schema change occurred at {at.crdb()}"
            )
        yield from self._rescan(old, feed, seq, at)
        if policy == SCHEMA_CHANGE_POLICY_BACKFILL:
            yield from self._rescan(new, feed, seq, at)

    def _rescan(self, table: TableSchema, feed: FeedSpec, seq: int, at: CommitTs) -> Iterator[Chunk]:
        from changefeed.pipeline.snapshot.chunks import read_chunk_batches

        scan_feed = replace(feed, created_seq=seq, created_wall=at.wall, created_logical=at.logical)
        try:
            batches = list(read_chunk_batches(str(self.plan.db_path), table, scan_feed, [], 0))
        except sqlite3.OperationalError:  # a dropped column: the old shape cannot be read again
            return
        index = [t.id for t in self.plan.tables].index(table.id)
        for batch in batches:
            yield from self._messages(batch, table, scan_feed, self.plan.families_of(index))

    def _refresh(self, rc: sqlite3.Connection, tables: list[TableSchema]) -> list[TableSchema]:
        """The targets' current schemas (a column added or dropped shows in later messages)."""
        out = []
        for t in tables:
            row = rc.execute("SELECT spec FROM _catalog WHERE id = ?", (t.id,)).fetchone()
            if row is None:
                raise UndefinedTable(f'CHANGEFEED target table "{t.short_name}" was dropped')
            new = TableSchema.from_json(orjson.loads(row[0]))
            out.append(new if new.version != t.version else t)
        return out

    def _read(
        self, rc: sqlite3.Connection, tables: list[TableSchema], positions: list[int]
    ) -> tuple[list[pa.RecordBatch], bool]:
        """New change rows of every table (at most POLL_ROWS each); whether nothing was cut off."""
        batches = []
        complete = True
        for i, t in enumerate(tables):
            b = read_changes(rc, t, positions[i], 1 << 62, limit=POLL_ROWS)
            if b.num_rows >= POLL_ROWS:
                complete = False
            batches.append(b)
        if not complete:  # emit only up to the earliest cut, so commit order holds across tables
            cut = min(_last_ts(b) for b in batches if b.num_rows >= POLL_ROWS)
            batches = [_upto(b, cut) for b in batches]
        for i, b in enumerate(batches):
            if b.num_rows:
                positions[i] = int(b.column("seq")[b.num_rows - 1].as_py())
        return batches, complete

    @staticmethod
    def _merge(batches: list[pa.RecordBatch], end: CommitTs | None) -> list[tuple[int, pa.RecordBatch]]:
        """Batches to encode, in commit order; rows at or after ``end_time`` left out."""
        if end is not None:
            batches = [_before(b, end) for b in batches]
        live = [(i, b) for i, b in enumerate(batches) if b.num_rows]
        if len(live) <= 1:
            return live
        # Several tables: split into runs of one table each, in (ts, logical) order.
        keyed = []
        for i, b in live:
            ts = b.column("ts").to_pylist()
            lg = b.column("lg").to_pylist()
            keyed += [(t, g, i, r) for r, (t, g) in enumerate(zip(ts, lg, strict=True))]
        keyed.sort(key=lambda x: (x[0], x[1], x[2], x[3]))
        runs: list[tuple[int, pa.RecordBatch]] = []
        start = 0
        for j in range(1, len(keyed) + 1):
            if j == len(keyed) or keyed[j][2] != keyed[start][2]:
                i = keyed[start][2]
                b = dict(live)[i]
                idx = pa.array([k[3] for k in keyed[start:j]], type=pa.int64())
                runs.append((i, b.take(idx)))
                start = j
        return runs


def _last_ts(b: pa.RecordBatch) -> tuple[int, int]:
    n = b.num_rows - 1
    return int(b.column("ts")[n].as_py()), int(b.column("lg")[n].as_py())


def _upto(b: pa.RecordBatch, cut: tuple[int, int]) -> pa.RecordBatch:
    ts, lg = b.column("ts").to_pylist(), b.column("lg").to_pylist()
    keep = [(t, g) <= cut for t, g in zip(ts, lg, strict=True)]
    return b.filter(pa.array(keep, type=pa.bool_()))


def _before(b: pa.RecordBatch, end: CommitTs) -> pa.RecordBatch:
    if not b.num_rows or _last_ts(b) < (end.wall, end.logical):
        return b
    ts, lg = b.column("ts").to_pylist(), b.column("lg").to_pylist()
    keep = [(t, g) < (end.wall, end.logical) for t, g in zip(ts, lg, strict=True)]
    return b.filter(pa.array(keep, type=pa.bool_()))


__all__ = ["DEFAULT_RESOLVED_NS", "POLL_S", "Chunk", "CoreChangefeed", "CorePlan", "Message"]
