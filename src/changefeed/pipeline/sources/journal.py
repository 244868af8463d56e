"""Spark source over a table's change stream ``x<id>``: ``format("changefeed-journal")``.

Options:

* ``path``: the database directory; ``table_id``: the table whose change stream to read;
* ``start_seq``: read changes with ``seq > start_seq`` (a feed's ``created_seq``; default 0);
* ``end_seq`` (batch only): read up to and including this seq (default: everything committed);
* ``maxRowsPerBatch`` (streaming): admission control, default 500000 rows. A micro-batch never
  splits a transaction: the end is extended to the last row of the cut row's transaction;
* ``resolved_ns`` (streaming): when set, a micro-batch that reaches the end of the committed
  stream, at least this long after the previous closed timestamp, closes a timestamp first
  (``Database.close_timestamp``) and records it in its end offset (see :func:`closed_of`).

Rows: ``changefeed.engine.changes.change_schema(table)``, read as Arrow record batches.
Streaming offsets are ``{"seq": N, "closed": [wall, logical, tx] | null, "new": bool}``:
``seq`` is the journal position; ``closed`` the last closed timestamp (every commit at or
below it has ``seq <= N``); ``new`` is true only in the offset of the batch that closed it, so
the job emits each resolved timestamp exactly once, deterministically on replay.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import (
    META_FIELDS,
    change_schema,
    rows_to_batch,
    storage_arrow_to_arrow,
    storage_class,
)
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import InvalidOption, UndefinedTable
from changefeed.pipeline.sources import arrow_sqlite

__all__ = [
    "JournalDataSource",
    "JournalPartition",
    "closed_of",
    "load_table",
    "read_table",
    "spark_schema",
    "stream_reader",
]

DEFAULT_MAX_ROWS = 500_000
#: Rows per Arrow batch handed to Spark (bounds a reader task's memory).
CHUNK = 50_000
#: A partition of a micro-batch covers at least this many seqs; at most MAX_PARTS partitions.
MIN_PART = 25_000
MAX_PARTS = 4


def spark_schema(table: TableSchema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(change_schema(table))


def load_table(db_dir: str | Path, table_id: int) -> TableSchema:
    """The table's schema from the catalog, read-only (no engine connection needed)."""
    conn = open_sqlite(Path(db_dir) / DB_FILE, readonly=True)
    try:
        row = conn.execute("SELECT spec FROM _catalog WHERE id = ?", (int(table_id),)).fetchone()
    finally:
        conn.close()
    if row is None:
        raise UndefinedTable(f"table id {table_id} does not exist")
    return TableSchema.from_json(orjson.loads(row[0]))


def closed_of(offset: Mapping[str, Any] | None) -> tuple[int, int, int] | None:
    """The closed timestamp ``(wall, logical, tx)`` a batch ending at ``offset`` must resolve, or None."""
    if not offset or not offset.get("new") or not offset.get("closed"):
        return None
    w, lg, tx = offset["closed"]
    return int(w), int(lg), int(tx)


class JournalPartition(InputPartition):
    """Change rows with ``lo < seq <= hi``."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__((lo, hi))
        self.lo = lo
        self.hi = hi

    def __repr__(self) -> str:
        return f"JournalPartition({self.lo}, {self.hi})"


def _opt(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    for k, v in options.items():
        if k.lower() == name.lower():
            return v
    return default


def _int_opt(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = _opt(options, name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidOption(f"option {name} must be an integer, got {raw!r}") from None


class _Options:
    def __init__(self, options: Mapping[str, str], table: TableSchema | None = None) -> None:
        path = _opt(options, "path")
        if not path:
            raise InvalidOption("the changefeed-journal source needs option path (the database directory)")
        self.path = str(Path(path).absolute())
        tid = _int_opt(options, "table_id", None)
        if tid is None:
            raise InvalidOption("the changefeed-journal source needs option table_id")
        self.table_id = tid
        self.start_seq = _int_opt(options, "start_seq", 0) or 0
        self.end_seq = _int_opt(options, "end_seq", None)
        self.max_rows = _int_opt(options, "maxRowsPerBatch", DEFAULT_MAX_ROWS) or DEFAULT_MAX_ROWS
        if self.max_rows <= 0:
            raise InvalidOption("option maxRowsPerBatch must be positive")
        self.resolved_ns = _int_opt(options, "resolved_ns", None)
        # A CockroachDB job's end_time: nothing committed after (end_wall, end_logical) is read.
        self.end_wall = _int_opt(options, "end_wall", None)
        self.end_logical = _int_opt(options, "end_logical", 0) or 0
        self.table = table if table is not None else load_table(self.path, tid)

    @property
    def file(self) -> Path:
        return Path(self.path) / DB_FILE

    def connect(self) -> Any:
        return open_sqlite(self.file, readonly=True)


def _max_seq(conn: Any, table_id: int) -> int:
    return int(conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{table_id}").fetchone()[0])


def split(lo: int, hi: int) -> list[JournalPartition]:
    n = hi - lo
    if n <= 0:
        return []
    parts = max(1, min(MAX_PARTS, n // MIN_PART))
    step = -(-n // parts)
    return [JournalPartition(a, min(a + step, hi)) for a in range(lo, hi, step)]


def fast_batch(table: TableSchema, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    """Change rows (tuples in ``_select_sql`` order) as one Arrow record batch."""
    return rows_to_batch(table, rows)


def _select_sql(table: TableSchema) -> str:
    return f"SELECT {_columns(table)} FROM x{table.id} WHERE seq > ? AND seq <= ? ORDER BY seq"


def _columns(table: TableSchema) -> str:
    """The change stream's columns in ``change_schema`` order (what ``rows_to_batch`` expects)."""
    return ", ".join(change_schema(table).names)


def read_range(
    opts: _Options, lo: int, hi: int, *, adbc: bool = True, conn: Any = None
) -> Iterator[pa.RecordBatch]:
    """Change rows ``lo < seq <= hi`` in batches of at most CHUNK seqs: straight into Arrow
    through the ADBC SQLite driver when every column's storage class is known, else (or from the
    first value that does not have its column's storage class on) through Python's sqlite3.
    ``adbc=False``: sqlite3 only (the driver process, see ``arrow_sqlite``); ``conn``: a
    read-only sqlite3 connection of the caller's to use (kept open)."""
    arrow = _ArrowReader.open(opts) if adbc else None
    own = conn is None
    sql = _select_sql(opts.table)
    try:
        a = lo
        while a < hi:
            b = min(a + CHUNK, hi)
            batch = arrow.read(a, b) if arrow is not None else None
            if batch is None:
                if arrow is not None:  # never both SQLite copies on the file at once
                    arrow.close()
                    arrow = None
                conn = conn or opts.connect()
                batch = fast_batch(opts.table, conn.execute(sql, (a, b)).fetchall())
            if batch.num_rows:
                yield batch
            a = b
    finally:
        if own and conn is not None:
            conn.close()
        if arrow is not None:
            arrow.close()


_local = threading.local()


def read_table(db_dir: str | Path, table: TableSchema, lo: int, hi: int) -> pa.Table:
    """Change rows ``lo < seq <= hi`` in ``table``'s schema, read in this process through
    Python's sqlite3 (the job's small micro-batches are read and encoded on the driver, which
    must never open the file with the ADBC driver's own SQLite: see ``arrow_sqlite``), on this
    thread's connection to the file (a new one parses the whole schema first)."""
    opts = _Options({"path": str(db_dir), "table_id": str(table.id)}, table)
    cache: dict[str, Any] | None = getattr(_local, "conns", None)
    if cache is None:
        cache = _local.conns = {}
    conn = cache.get(opts.path)
    if conn is None:
        conn = cache[opts.path] = opts.connect()
    try:
        batches = list(read_range(opts, lo, hi, adbc=False, conn=conn))
    except sqlite3.Error:
        cache.pop(opts.path, None)
        conn.close()
        raise
    return pa.Table.from_batches(batches, schema=change_schema(table))


class _ArrowReader:
    """Change rows read by the ADBC SQLite driver (``arrow_sqlite``), column-wise in C; a value
    outside its column's storage class makes :meth:`read` return None (the caller falls back)."""

    def __init__(self, opts: _Options, conn: Any, sql: str) -> None:
        self.table = opts.table
        self.conn = conn
        self.sql = sql
        self.target = change_schema(opts.table)

    @classmethod
    def open(cls, opts: _Options) -> _ArrowReader | None:
        table = opts.table
        values = [c for c in table.stored if not c.is_key]
        classes = [pa.int64()] * len(META_FIELDS) + [storage_class(c.type) for c in table.stored]
        classes += [pa.int64()] * len(values) + [storage_class(c.type) for c in values]
        sql = arrow_sqlite.pinned(classes, _select_sql(table))
        conn = None if sql is None else arrow_sqlite.connect(opts.file)
        return None if sql is None or conn is None else cls(opts, conn, sql)

    def read(self, lo: int, hi: int) -> pa.RecordBatch | None:
        try:
            raw = arrow_sqlite.read_table(self.conn, self.sql, (lo, hi), hi - lo + 1)
            return self._convert(raw)
        except Exception:  # a value outside its column's storage class: read through Python
            return None

    def _convert(self, raw: pa.Table) -> pa.RecordBatch:
        meta = len(META_FIELDS)
        arrays: list[pa.Array] = []
        for i, f in enumerate(META_FIELDS):
            a = arrow_sqlite.column(raw, i)
            arrays.append(a.cast(pa.int8()).cast(pa.bool_()) if f.type == pa.bool_() else a.cast(f.type))
        stored = self.table.stored
        n_values = len(stored) - len(self.table.key)
        for j, c in enumerate(stored):
            arrays.append(storage_arrow_to_arrow(c, arrow_sqlite.column(raw, meta + j)))
        base = meta + len(stored)
        for j in range(n_values):
            arrays.append(arrow_sqlite.column(raw, base + j).cast(pa.int8()).cast(pa.bool_()))
        base += n_values
        for j, c in enumerate(c for c in stored if not c.is_key):
            arrays.append(storage_arrow_to_arrow(c, arrow_sqlite.column(raw, base + j)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)

    def close(self) -> None:
        self.conn.close()


class JournalBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        conn = self.opts.connect()
        try:
            hi = _max_seq(conn, self.opts.table_id)
        finally:
            conn.close()
        if self.opts.end_seq is not None:
            hi = min(hi, self.opts.end_seq)
        parts = split(self.opts.start_seq, hi)
        return parts or [JournalPartition(0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, JournalPartition)
        return read_range(self.opts, partition.lo, partition.hi)


class JournalStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self._target: int | None = None
        self._target_closed: list[int] | None = None
        self._conn: Any = None

    # -- helpers -----------------------------------------------------------------------------
    def _top(self) -> int:
        """The newest journal position this stream may read (capped at ``end_wall``)."""
        top = _max_seq(self._c(), self.opts.table_id)
        if self.opts.end_wall is None:
            return top
        w, lg = self.opts.end_wall, self.opts.end_logical
        row = (
            self._c()
            .execute(
                f"SELECT seq FROM x{self.opts.table_id} WHERE seq <= ? AND (ts < ? OR (ts = ? AND lg <= ?))"
                " ORDER BY seq DESC LIMIT 1",
                (top, w, w, lg),
            )
            .fetchone()
        )
        return 0 if row is None else int(row[0])

    def _c(self) -> Any:
        if self._conn is None:
            self._conn = self.opts.connect()
        return self._conn

    def _close_ts(self) -> list[int]:
        from changefeed.engine.database import Database

        db = Database(self.opts.path, create=False)
        try:
            ts, tx = db.close_timestamp()
        finally:
            db.close()
        if self.opts.end_wall is not None and (ts.wall, ts.logical) > (
            self.opts.end_wall,
            self.opts.end_logical,
        ):
            return [self.opts.end_wall, self.opts.end_logical, tx]  # never resolve past end_time
        return [ts.wall, ts.logical, tx]

    def _cut(self, start: int, top: int, max_rows: int) -> int:
        """End seq of a batch starting after ``start`` with at most ~max_rows rows, not splitting a txn."""
        c = self._c()
        row = c.execute(
            f"SELECT seq, tx FROM x{self.opts.table_id} WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?",
            (start, top, max_rows - 1),
        ).fetchone()
        if row is None:
            return top
        cut, tx = int(row[0]), int(row[1])
        nxt = c.execute(
            f"SELECT seq FROM x{self.opts.table_id} WHERE seq > ? AND seq <= ? AND tx != ? ORDER BY seq LIMIT 1",
            (cut, top, tx),
        ).fetchone()
        if nxt is None:
            return top
        end = c.execute(
            f"SELECT MAX(seq) FROM x{self.opts.table_id} WHERE seq >= ? AND seq < ?", (cut, int(nxt[0]))
        ).fetchone()[0]
        return int(end)

    # -- the DataSourceStreamReader API ------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return {"seq": self.opts.start_seq, "closed": None, "new": False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.opts.max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        if self.opts.resolved_ns:
            self._target_closed = self._close_ts()
        self._target = self._top()

    def reportLatestOffset(self) -> dict[str, Any]:
        return {"seq": self._top()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        s = int(start.get("seq", self.opts.start_seq))
        closed = start.get("closed")
        max_rows = int(limit.max_rows) if isinstance(limit, ReadMaxRows) else None
        if self._target is not None:
            top = self._target
        else:
            top = self._top()
            if self.opts.resolved_ns:
                now = time.time_ns()
                if closed is None or now - int(closed[0]) >= self.opts.resolved_ns:
                    fresh = self._close_ts()
                    top = self._top()  # after the close: covers it
                    end = top if max_rows is None else self._cut(s, top, max_rows)
                    if end == top:
                        return {"seq": top, "closed": fresh, "new": True}
        top = max(top, s)
        end = top if max_rows is None or top == s else self._cut(s, top, max_rows)
        tc = self._target_closed
        if self._target is not None and tc is not None and end == self._target and closed != tc:
            return {"seq": end, "closed": tc, "new": True}
        if end == s:
            return dict(start)
        return {"seq": end, "closed": closed, "new": False}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return split(int(start.get("seq", self.opts.start_seq)), int(end["seq"]))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, JournalPartition)
        return read_range(self.opts, partition.lo, partition.hi)

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def stream_reader(options: Mapping[str, str]) -> JournalStreamReader:
    """The streaming reader a query with these options would use, for the driver to plan the
    same micro-batches without Spark (``changefeed.pipeline.runner``)."""
    return JournalStreamReader(_Options(options))


class JournalDataSource(DataSource):
    """``format("changefeed-journal")``: a table's change stream, batch or streaming."""

    @classmethod
    def name(cls) -> str:
        return "changefeed-journal"

    def schema(self) -> StructType:
        return spark_schema(_Options(self.options).table)

    def reader(self, schema: StructType) -> DataSourceReader:
        return JournalBatchReader(_Options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JournalStreamReader(_Options(self.options))
