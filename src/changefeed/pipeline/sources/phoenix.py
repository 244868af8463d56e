"""Spark source over an Apache Phoenix CDC object: ``spark.read[Stream].format("phoenix-cdc")``.

The PHOENIX-7001 design's application loop, as a Spark stream: every micro-batch is the CDC
query for the next time range ``[previous end, new end)``, where the new end is a safety margin
``s`` (default 1,000 ms) behind the clock and never past a closed timestamp, so a range once read
never gains a row later. Offsets are ``{"ms": end}``; a replayed batch reads the same range and
the same rows, so any sink that commits a batch id with its rows (``foreachBatch`` into a
transactional store, the file sink) receives every change exactly once. The same query reads as
a batch (``spark.read``) between ``startTime`` and ``endTime``, for back-fills.

Options:

* ``path`` (or ``.load(dbdir)``): the database directory; ``cdc``: the CDC object's name
  (``[schema.]NAME``, Phoenix case rules);
* ``startTime``: epoch milliseconds or a ``TO_DATE`` string (GMT); default: the CDC's creation;
* ``endTime`` (batch): exclusive end, same forms; default: the safe end now;
* ``include``: change scopes, e.g. ``"PRE,POST"`` (the ``CDC_INCLUDE`` hint); default: the CDC's
  ``INCLUDE``;
* ``safetyMarginMs``: the margin ``s`` (default 1000);
* ``maxRowsPerBatch`` (streaming): admission control, cut on whole milliseconds.

Rows: ``phoenix_row_timestamp timestamp, <key columns>, cdc_json string`` (Phoenix's
``PHOENIX_ROW_TIMESTAMP()`` and ``"CDC JSON"`` under names every Spark sink accepts). One input
partition per time-index bucket and time slice of the span the range's changes cover; a task
reads its partition through the ADBC SQLite driver into Arrow and builds the JSON column-wise
(``formats/phoenix_arrow.py``), through ``sqlite3`` where it cannot; rows come as Arrow record
batches.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from changefeed.engine import phoenix
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import arrow_type, storage_arrow_to_arrow, storage_class, storage_to_arrow
from changefeed.engine.database import DB_FILE, Database, open_sqlite
from changefeed.exceptions import InvalidOption, PhoenixIllegalData, PhoenixTableUndefined
from changefeed.formats import phoenix_json
from changefeed.pipeline.sources import arrow_sqlite

__all__ = ["PhoenixCdcDataSource", "arrow_schema"]

DEFAULT_SAFETY_MS = 1000
CHUNK = 50_000
TS_COLUMN = "phoenix_row_timestamp"
JSON_COLUMN = "cdc_json"


def arrow_schema(table: TableSchema) -> pa.Schema:
    fields = [pa.field(TS_COLUMN, pa.timestamp("us", tz="UTC"), nullable=False)]
    fields += [pa.field(c.name, arrow_type(c.type), nullable=False) for c in table.key]
    fields.append(pa.field(JSON_COLUMN, pa.string(), nullable=False))
    return pa.schema(fields)


def _opt(options: Mapping[str, str], name: str) -> str | None:
    for k, v in options.items():
        if k.lower() == name.lower():
            return v
    return None


def parse_time(name: str, raw: str | None) -> int | None:
    """Epoch ms from an option: an integer, or a ``TO_DATE`` string in GMT; ``name`` says which
    option, as the user wrote it (``option startTime``, ``--from``)."""
    if raw is None or not str(raw).strip():
        return None
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    from changefeed.sql.phoenix_functions import parse_date

    try:
        parsed = parse_date(text)
    except PhoenixIllegalData as exc:
        raise InvalidOption(
            f"{name}: {exc.detail}; give epoch milliseconds or a date and time such as "
            "'2026-01-01 00:00:00' (GMT)"
        ) from None
    assert parsed is not None
    return int((parsed - dt.datetime(1970, 1, 1)) / dt.timedelta(milliseconds=1))


def _integer(name: str, raw: str, lowest: int) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = lowest - 1
    if n < lowest:
        raise InvalidOption(f'option {name} must be an integer of at least {lowest}, got "{raw}"')
    return n


class _Options:
    """Validated options (picklable)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        path = _opt(options, "path")
        if not path:
            raise InvalidOption("the phoenix-cdc source needs option path (the database directory)")
        self.path = str(Path(path).absolute())
        name = _opt(options, "cdc")
        if not name:
            raise InvalidOption("the phoenix-cdc source needs option cdc (the CDC object's name)")
        self.cdc_name = name
        conn = open_sqlite(Path(self.path) / DB_FILE, readonly=True)
        try:
            tables = [
                TableSchema.from_json(orjson.loads(s)) for (s,) in conn.execute("SELECT spec FROM _catalog")
            ]
        finally:
            conn.close()
        table = phoenix.find_cdc_table(tables, name)
        if table is None:
            raise PhoenixTableUndefined(f" tableName={name}")
        self.table = table
        cdc = phoenix.cdc_of(table)
        assert cdc is not None
        self.buckets = cdc.buckets
        include = _opt(options, "include")
        try:
            words = include.split(",") if include is not None else list(cdc.include)
            self.scopes = phoenix_json.parse_scopes(words)
        except ValueError as exc:
            raise InvalidOption(
                f"option include: unknown change scope {exc}; use PRE, POST, CHANGE"
            ) from None
        safety = _opt(options, "safetyMarginMs")
        self.safety_ms = _integer("safetyMarginMs", safety, 0) if safety else DEFAULT_SAFETY_MS
        start = parse_time("option startTime", _opt(options, "startTime"))
        self.start_ms = cdc.created_ms if start is None else start
        self.end_ms = parse_time("option endTime", _opt(options, "endTime"))
        if self.end_ms is not None and self.end_ms < self.start_ms:
            raise InvalidOption(
                f"options startTime/endTime: the time range is reversed ({self.start_ms} > {self.end_ms})"
            )
        rows = _opt(options, "maxRowsPerBatch") or _opt(options, "maxOffsetsPerTrigger")
        self.max_rows = _integer("maxRowsPerBatch", rows, 1) if rows else None

    def connect(self) -> Any:
        return open_sqlite(Path(self.path) / DB_FILE, readonly=True)

    def data_span(self, lo: int, hi: int) -> tuple[int, int]:
        """``[lo, hi)`` narrowed to the changes in it: from the first change's millisecond to one
        past the last one's (two index seeks per bucket), so time slices split the changes, not
        the empty time before or after them (a batch read ends now, the history may be old)."""
        if hi <= lo:
            return lo, hi
        p = phoenix.index_table(self.table)
        conn = self.connect()
        try:
            first, last = None, None
            for b in range(self.buckets):
                row = conn.execute(
                    f"SELECT ms FROM {p} WHERE b = ? AND ms >= ? AND ms < ? ORDER BY ms LIMIT 1", (b, lo, hi)
                ).fetchone()
                if row is None:
                    continue
                top = conn.execute(
                    f"SELECT ms FROM {p} WHERE b = ? AND ms >= ? AND ms < ? ORDER BY ms DESC LIMIT 1",
                    (b, lo, hi),
                ).fetchone()
                first = int(row[0]) if first is None else min(first, int(row[0]))
                last = int(top[0]) if last is None else max(last, int(top[0]))
        finally:
            conn.close()
        if first is None or last is None:
            return lo, lo
        return first, last + 1

    def safe_end(self) -> int:
        db = Database(self.path, create=False)
        try:
            return phoenix.safe_upper_ms(db, self.safety_ms)
        finally:
            db.close()


class RangePartition(InputPartition):
    """Changes with ``lo <= ms < hi`` in one bucket of the time index."""

    def __init__(self, bucket: int, lo: int, hi: int) -> None:
        super().__init__((bucket, lo, hi))
        self.bucket, self.lo, self.hi = bucket, lo, hi


def read_range(opts: _Options, part: RangePartition) -> Iterator[pa.RecordBatch]:
    """The rows of one partition: through the ADBC SQLite driver when it can
    (:func:`_arrow_batches`), else, or from where a failed Arrow read stopped, through
    ``sqlite3``."""
    done: tuple[int, tuple[Any, ...], int] | None = None
    fast = _arrow_batches(opts, part)
    if fast is not None:
        try:
            for out, last in fast:
                yield out
                done = last
            return
        except _ReadFallback:
            pass  # the ADBC connection is closed: read the rest through sqlite3
    yield from _sqlite_batches(opts, part, done)


def _sqlite_batches(
    opts: _Options, part: RangePartition, after: tuple[int, tuple[Any, ...], int] | None
) -> Iterator[pa.RecordBatch]:
    from changefeed.formats.phoenix_batch import encoded_changes

    table = opts.table
    schema = arrow_schema(table)
    conn = opts.connect()
    try:
        for chunk, texts in encoded_changes(
            conn,
            table,
            opts.scopes,
            part.lo,
            part.hi,
            buckets=[part.bucket],
            after=after,
            first=CHUNK,
            most=CHUNK,
        ):
            cols = list(zip(*chunk, strict=True))
            arrays: list[pa.Array] = [
                pc.multiply(pa.array(cols[0], type=pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC"))
            ]
            for j, c in enumerate(table.key):
                arrays.append(storage_to_arrow(c, cols[1 + j]))
            arrays.append(pa.array(texts, type=pa.string()))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    finally:
        conn.close()


class _ReadFallback(Exception):
    """The ADBC read failed (a value outside its column's storage class): read through sqlite3."""


def _arrow_batches(
    opts: _Options, part: RangePartition
) -> Iterator[tuple[pa.RecordBatch, tuple[int, tuple[Any, ...], int]]] | None:
    """The partition read by the ADBC SQLite driver straight into Arrow and encoded column-wise
    (:func:`changefeed.formats.phoenix_arrow.encode_arrow`), each batch with the ``(ms, key,
    seq)`` position of its last row; None when it cannot (no driver, too many value columns for
    the shape bits, a column without a fixed storage class). A value outside its storage class
    ends the iteration with :class:`_ReadFallback`, after the connection is closed (Spark's
    Python workers hold no other connection to the file meanwhile: see ``arrow_sqlite``)."""
    from changefeed.formats.phoenix_arrow import encode_arrow
    from changefeed.formats.phoenix_batch import MAX_BATCH_COLUMNS, BatchEncoder

    table = opts.table
    vals = table.stored_values
    if len(vals) > MAX_BATCH_COLUMNS or not arrow_sqlite.available():
        return None
    batch = BatchEncoder(phoenix_json.EventEncoder(table, opts.scopes), len(table.key))
    sql, params = phoenix.range_sql(table, part.lo, part.hi, coded=True, with_old=batch.wants_old)
    classes = [pa.int64(), *(storage_class(c.type) for c in table.key), pa.int64(), pa.int64()]
    classes += [] if batch.folded else [pa.int64()]
    classes += [storage_class(c.type) for c in vals] * (2 if batch.wants_old else 1)
    pinned = arrow_sqlite.pinned(classes, sql)
    if pinned is None:
        return None
    return _arrow_read(opts, part, batch, pinned, [part.bucket, *params], encode_arrow)


def _arrow_read(
    opts: _Options,
    part: RangePartition,
    batch: Any,
    sql: str,
    params: list[Any],
    encode_arrow: Any,
) -> Iterator[tuple[pa.RecordBatch, tuple[int, tuple[Any, ...], int]]]:
    table = opts.table
    schema = arrow_schema(table)
    nk, nv = len(table.key), len(table.stored_values)
    types = [c.type for c in table.stored_values]
    conn = arrow_sqlite.connect(Path(opts.path) / DB_FILE)
    if conn is None:
        raise _ReadFallback
    try:
        reader = arrow_sqlite.read_batches(conn, sql, params, CHUNK)
        while True:
            try:
                b = next(reader)
            except StopIteration:
                return
            except Exception as exc:  # a value outside its column's storage class
                raise _ReadFallback from exc
            code = b.column(2 + nk).to_numpy()
            if batch.folded:
                code, differs = code & ((1 << batch.shape_bits) - 1), code >> batch.shape_bits
            else:
                differs = b.column(3 + nk).to_numpy()
            at = batch.values_at
            new = [b.column(at + i) for i in range(nv)]
            old = [b.column(at + nv + i) for i in range(nv)] if batch.wants_old else None
            texts = encode_arrow(batch, types, code, lambda d=differs: d, new, old)
            ms = b.column(0)
            arrays = [pc.multiply(ms, 1000).cast(pa.timestamp("us", tz="UTC"))]
            arrays += [storage_arrow_to_arrow(c, b.column(1 + j)) for j, c in enumerate(table.key)]
            arrays.append(texts)
            last = b.num_rows - 1
            key = tuple(b.column(1 + j)[last].as_py() for j in range(nk))
            pos = (int(ms[last].as_py()), key, int(b.column(1 + nk)[last].as_py()))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema), pos
    finally:
        conn.close()


#: A range is cut into up to this many time slices per bucket (read in parallel), none shorter
#: than MIN_SLICE_MS.
MAX_SLICES = 4
MIN_SLICE_MS = 1000


def _partitions(opts: _Options, lo: int, hi: int) -> list[RangePartition]:
    """One input partition per bucket and time slice of ``[lo, hi)``."""
    if hi <= lo:
        return []
    slices = max(1, min(MAX_SLICES, (hi - lo) // MIN_SLICE_MS))
    step = -(-(hi - lo) // slices)
    cuts = [(a, min(a + step, hi)) for a in range(lo, hi, step)]
    return [RangePartition(b, a, z) for b in range(opts.buckets) for a, z in cuts]


class PhoenixBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        hi = self.opts.end_ms if self.opts.end_ms is not None else self.opts.safe_end()
        lo, hi = self.opts.data_span(self.opts.start_ms, hi)
        return _partitions(self.opts, lo, hi) or [RangePartition(0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.opts, partition)


class PhoenixStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of successive time ranges ending ``safetyMarginMs`` behind now."""

    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self._target: int | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"ms": self.opts.start_ms}

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return ReadMaxRows(self.opts.max_rows) if self.opts.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.opts.safe_end()

    def _cut(self, lo: int, hi: int, max_rows: int) -> int:
        """The end of a range from ``lo`` holding about ``max_rows`` changes, on a whole ms."""
        conn = self.opts.connect()
        try:
            p = phoenix.index_table(self.opts.table)
            per = max(1, max_rows // self.opts.buckets)
            cut = hi
            for b in range(self.opts.buckets):
                row = conn.execute(
                    f"SELECT ms FROM {p} WHERE b = ? AND ms >= ? AND ms < ? ORDER BY ms LIMIT 1 OFFSET ?",
                    (b, lo, hi, per),
                ).fetchone()
                if row is not None:
                    cut = min(cut, max(int(row[0]), lo + 1))
            return cut
        finally:
            conn.close()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        lo = int(start.get("ms", self.opts.start_ms))
        hi = self._target if self._target is not None else self.opts.safe_end()
        if hi <= lo:
            return dict(start)
        if isinstance(limit, ReadMaxRows):
            hi = self._cut(lo, hi, int(limit.max_rows))
        return {"ms": hi}

    def reportLatestOffset(self) -> dict[str, Any]:
        return {"ms": self.opts.safe_end()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        lo, hi = self.opts.data_span(int(start.get("ms", self.opts.start_ms)), int(end["ms"]))
        return _partitions(self.opts, lo, hi)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass


class PhoenixCdcDataSource(DataSource):
    """``format("phoenix-cdc")``: a CDC object's changes by time range, batch or streaming."""

    @classmethod
    def name(cls) -> str:
        return "phoenix-cdc"

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(arrow_schema(_Options(self.options).table))

    def reader(self, schema: StructType) -> DataSourceReader:
        return PhoenixBatchReader(_Options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PhoenixStreamReader(_Options(self.options))
