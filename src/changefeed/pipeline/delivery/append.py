"""Appending encoded records to a feed's topic (or its job's sink writer), in journal order.

Encoded records are ``partition, key, value, ts`` rows. They reach the embedded topics (or a
CockroachDB job's sink writer, which has the topic store's append shape) one append per topic
partition, idempotent per ``(writer, batch id)``:

- ``write_encoded``: a DataFrame's records, shuffled by topic partition and appended on the
  executors (throughput), or collected and appended from the driver (small batches);
- ``append_on_driver``: an Arrow table's records appended from this process;
- ``encode_on_driver``: journal rows read and encoded in this process (no Spark job);
- ``partition_appender``: the ``mapInArrow`` function both use, also used by the initial scan
  and the backfill (one append per partition run of a sorted stream of record batches).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.catalog import TableSchema
from changefeed.feeds.spec import FeedSpec
from changefeed.formats.base import ColumnarEncoder
from changefeed.pipeline.delivery.families import family_batch
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from changefeed.formats.base import Encoder, Record
    from changefeed.pipeline.sinks.base import SinkWriter

#: The records a topic append takes.
RECORDS = pa.schema(
    [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("ts", pa.int64())]
)


def partition_appender(
    store: TopicStore | SinkWriter, topic: str, writer: str, batch_id: int, resolved: tuple[bytes, int] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: rows sorted by (partition, order) -> one append per topic partition."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        current: int | None = None
        pending: list[pa.RecordBatch] = []
        done_p: list[int] = []
        done_n: list[int] = []

        def flush() -> None:
            if current is None:
                return
            t = pa.Table.from_batches(pending) if pending else RECORDS.empty_table()
            t = t.select(["key", "value", "ts"]).cast(RECORDS)
            if resolved is not None:
                t = with_resolved(t, resolved)
            store.append(topic, current, writer, batch_id, t)
            done_p.append(current)
            done_n.append(t.num_rows)

        for b in batches:
            if b.num_rows == 0:
                continue
            vals = b.column("partition").to_numpy(zero_copy_only=False)
            cuts = [0, *(np.flatnonzero(np.diff(vals)) + 1).tolist(), len(vals)]
            for lo, hi in itertools.pairwise(cuts):
                p = int(vals[lo])
                if p != current:
                    flush()
                    current = p
                    pending = []
                pending.append(b.slice(lo, hi - lo))
        flush()
        yield pa.RecordBatch.from_arrays(
            [pa.array(done_p, pa.int32()), pa.array(done_n, pa.int64())], names=["partition", "n"]
        )

    return write


def with_resolved(records: pa.Table, resolved: tuple[bytes, int]) -> pa.Table:
    """A partition's records with its resolved record (a YDB barrier, a CockroachDB resolved
    timestamp) placed right after the last record at or below the resolved time: every change it
    covers precedes it, and a change of the batch committed after it (a YDB barrier is the
    closed timestamp rounded down to the interval) follows it, as in YDB's partitions."""
    ts = records.column("ts").to_numpy()
    below = np.flatnonzero(ts <= resolved[1])
    at = int(below[-1]) + 1 if len(below) else 0
    marker = pa.table(
        {"key": pa.array([None], pa.binary()), "value": [resolved[0]], "ts": [resolved[1]]},
        schema=RECORDS,
    )
    return pa.concat_tables([records.slice(0, at), marker, records.slice(at)])


def _nbytes(b: pa.RecordBatch | pa.Table) -> int:
    """Key and value bytes of the records in ``b``."""
    total = 0
    for name in ("key", "value"):
        got = pc.sum(pc.binary_length(b.column(name))).as_py()
        total += int(got or 0)
    return total


#: What :func:`with_stats` yields.
STATS_SCHEMA = "partition int, n long, bytes long, oldest long"


def with_stats(
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A :func:`partition_appender` that also reports the key and value bytes and the oldest
    commit (wall ns) of the records it was given, on its first output row (``STATS_SCHEMA``)."""

    def wrapped(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: list[int | None] = [0, None]

        def tee() -> Iterator[pa.RecordBatch]:
            for b in batches:
                if b.num_rows:
                    seen[0] = int(seen[0] or 0) + _nbytes(b)
                    low = pc.min(b.column("ts")).as_py()
                    if low is not None and (seen[1] is None or low < int(seen[1])):
                        seen[1] = int(low)
                yield b

        first = True
        for rb in fn(tee()):
            n = rb.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    rb.column("partition"),
                    rb.column("n"),
                    pa.array([int(seen[0] or 0) if first and i == 0 else 0 for i in range(n)], pa.int64()),
                    pa.array([seen[1] if first and i == 0 else None for i in range(n)], pa.int64()),
                ],
                names=["partition", "n", "bytes", "oldest"],
            )
            first = first and n == 0

    return wrapped


@dataclass
class BatchStats:
    """What one micro-batch appended: messages, key and value bytes, the oldest commit (wall ns)."""

    messages: int = 0
    nbytes: int = 0
    oldest_ns: int | None = None

    def add(self, n: int, nbytes: int, oldest: int | None) -> None:
        self.messages += int(n)
        self.nbytes += int(nbytes)
        if oldest is not None and oldest > 0 and (self.oldest_ns is None or oldest < self.oldest_ns):
            self.oldest_ns = int(oldest)

    def add_rows(self, rows: Iterable[Any]) -> dict[int, int]:
        """Fold :func:`with_stats` output rows (``partition, n, bytes, oldest``); {partition: n}."""
        out: dict[int, int] = {}
        for r in rows:
            p, n, b, t = (r["partition"], r["n"], r["bytes"], r["oldest"]) if not isinstance(r, tuple) else r
            out[int(p)] = int(n)
            self.add(int(n), int(b), None if t is None else int(t))
        return out


def append_on_driver(
    table: pa.Table,
    store: TopicStore | SinkWriter,
    feed: FeedSpec,
    writer: str,
    batch_id: int,
    resolved: tuple[bytes, int] | None,
    stats: BatchStats | None = None,
) -> dict[int, int]:
    """Append encoded records (``partition, key, value, ts`` in journal order) from this process:
    stable-sorted by topic partition, one append per partition; {topic partition: records}."""
    table = table.take(pc.sort_indices(table, sort_keys=[("partition", "ascending")]))
    fn = with_stats(partition_appender(store, feed.topic, writer, batch_id, resolved))
    stats = stats if stats is not None else BatchStats()
    out: dict[int, int] = {}
    for rb in fn(iter(table.to_batches())):
        cols = [rb.column(c).to_pylist() for c in ("partition", "n", "bytes", "oldest")]
        out.update(stats.add_rows(zip(*cols, strict=True)))
    return out


def encode_on_driver(
    db: Path, table: TableSchema, encoder: Encoder, feed: FeedSpec, lo: int, hi: int
) -> pa.Table:
    """The records of journal rows ``lo < seq <= hi`` through the encoder's Python face, read and
    encoded in this process (no Spark job): ``partition, key, value, ts`` in journal order, the
    same records ``encode_spark`` gives (the two faces agree byte for byte)."""
    from changefeed.pipeline.sources.journal import read_table  # imports pyspark

    rows = read_table(db, table, lo, hi).combine_chunks()
    return encode_rows(rows.to_batches()[0] if rows.num_rows else None, table, encoder, feed)


def encode_rows(
    rows: pa.RecordBatch | None, table: TableSchema, encoder: Encoder, feed: FeedSpec
) -> pa.Table:
    """Change rows (the change stream's schema) through the encoder's Python face, in this
    process: ``partition, key, value, ts`` in row order."""
    recs: list[Record] = []
    if rows is not None and rows.num_rows:
        batch = family_batch(rows, table, feed)
        if batch.num_rows and isinstance(encoder, ColumnarEncoder):
            return encoder.encode_batch(batch, table, feed)  # column-wise: no tuple per record
        if batch.num_rows:
            recs = encoder.encode_python(batch, table, feed)
    cols: list[tuple[Any, ...]] = list(zip(*recs, strict=True)) if recs else [(), (), (), ()]
    return pa.table(
        [
            pa.array(cols[0], pa.int32()),
            pa.array(cols[1], pa.binary()),
            pa.array(cols[2], pa.binary()),
            pa.array(cols[3], pa.int64()),
        ],
        names=["partition", "key", "value", "ts"],
    )


def write_encoded(
    encoded: DataFrame,
    store: TopicStore | SinkWriter,
    feed: FeedSpec,
    writer: str,
    batch_id: int,
    resolved: tuple[bytes, int] | None,
    shuffle_partitions: int,
    small: bool = False,
    stats: BatchStats | None = None,
) -> dict[int, int]:
    """Append encoded records (in the DataFrame's row order per topic partition) on the executors;
    returns {topic partition: records appended}."""
    from pyspark.sql import functions as F

    stats = stats if stats is not None else BatchStats()
    if small:
        # One stage: collect as Arrow (journal order: the source's partitions are consecutive seq
        # ranges), append from the driver.
        table = encoded.select("partition", "key", "value", "ts").toArrow()
        return append_on_driver(table, store, feed, writer, batch_id, resolved, stats)

    ordered = (
        encoded.select("partition", "key", "value", "ts", F.monotonically_increasing_id().alias("_o"))
        .repartition(max(1, min(shuffle_partitions, feed.partitions)), "partition")
        .sortWithinPartitions("partition", "_o")
    )
    fn = with_stats(partition_appender(store, feed.topic, writer, batch_id, resolved))
    return stats.add_rows(ordered.mapInArrow(fn, STATS_SCHEMA).collect())
