"""The encoder seam: change rows in, (partition, key, value, ts) records out.

An encoder has two faces that must agree byte for byte:

* ``encode_spark(df, table, feed)``: Spark column expressions (JVM-side, vectorised) over a
  DataFrame of change rows (see ``changefeed.engine.changes`` for its columns), returning a
  DataFrame with columns ``partition int, key binary, value binary, ts long``;
* ``encode_python(batch, table, feed)``: the same records from a pyarrow RecordBatch in plain
  Python, the reference used by tests and by the single-process baseline.

An encoder may also have a column-wise face, :class:`ColumnarEncoder` ``encode_batch``: the same
records as Arrow columns, computed with Arrow kernels in the calling process. Spark tasks that
read rows in Python and append records in Python (the initial scan and the schema-change
backfill into the embedded topics) use it instead of a round trip through the JVM.

Encoders are pure: no clock, no I/O. ``resolved(...)`` builds a resolved-timestamp record value.
Implementations register themselves in :data:`REGISTRY` by format name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import xxhash

from changefeed.exceptions import InvalidOption

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec

#: (partition, key, value, ts) as produced by ``encode_python``.
Record = tuple[int, bytes | None, bytes, int]

#: The columns of the DataFrame every ``encode_spark`` returns.
OUTPUT_DDL = "partition int, key binary, value binary, ts long"


def map_records(df: DataFrame, encode_batch: Callable[[pa.RecordBatch], list[Record]]) -> DataFrame:
    """An ``encode_spark`` made of a Python face that turns one Arrow batch of change rows into
    records: ``encode_batch`` on the executors (``mapInArrow``), its records as Arrow batches."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = pa.schema(
            [("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary()), ("ts", pa.int64())]
        )
        for b in batches:
            recs = encode_batch(b)
            if recs:
                p, k, v, t = zip(*recs, strict=True)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(p, pa.int32()),
                        pa.array(k, pa.binary()),
                        pa.array(v, pa.binary()),
                        pa.array(t, pa.int64()),
                    ],
                    schema=schema,
                )

    return df.mapInArrow(run, OUTPUT_DDL)


def partition_of(key: bytes, partitions: int) -> int:
    """Topic partition of a message key; equals Spark's ``pmod(xxhash64(key), n)``."""
    h = xxhash.xxh64_intdigest(key, seed=42)
    if h >= 1 << 63:
        h -= 1 << 64
    return h % partitions


def partitions_of(keys: pa.Array, partitions: int) -> pa.Array:
    """:func:`partition_of` of every key of a binary array, as an int32 array."""
    import pyarrow as pa

    if partitions == 1:
        return pa.repeat(pa.scalar(0, pa.int32()), len(keys))
    digest = xxhash.xxh64_intdigest
    hashes = np.array([digest(k, 42) for k in keys.to_pylist()], dtype=np.uint64).view(np.int64)
    return pa.array(np.mod(hashes, partitions).astype(np.int32))  # numpy's mod is Spark's pmod


def records_table(keys: pa.Array, values: pa.Array, ts: pa.Array, partitions: int) -> pa.Table:
    """Encoded records as Arrow: ``partition int32, key binary, value binary, ts int64``."""
    import pyarrow as pa

    return pa.table(
        {
            "partition": partitions_of(keys, partitions),
            "key": keys.cast(pa.binary()),
            "value": values.cast(pa.binary()),
            "ts": ts.cast(pa.int64()),
        }
    )


@runtime_checkable
class ColumnarEncoder(Protocol):
    """The column-wise face of an encoder: ``encode_python``'s records as one Arrow table
    (:func:`records_table`), byte for byte, computed with Arrow kernels."""

    def encode_batch(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> pa.Table: ...


class Encoder(ABC):
    name: str = ""

    @abstractmethod
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame: ...

    @abstractmethod
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]: ...

    @abstractmethod
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes: ...


REGISTRY: dict[str, Callable[[], Encoder]] = {}


def register(name: str) -> Callable[[Callable[[], Encoder]], Callable[[], Encoder]]:
    def deco(factory: Callable[[], Encoder]) -> Callable[[], Encoder]:
        REGISTRY[name] = factory
        return factory

    return deco


def get_encoder(name: str) -> Encoder:
    # Import the built-in formats so they register (cheap; no pyspark import at module level).
    import importlib

    for module in (
        "changefeed.formats.ydb_json",
        "changefeed.formats.debezium",
        "changefeed.formats.crdb_avro",  # CockroachDB Avro
        "changefeed.formats.crdb_json",  # CockroachDB changefeeds
        "changefeed.formats.crdb_csv",  # CockroachDB CSV (sinks)
        "changefeed.formats.crdb_parquet",  # CockroachDB parquet (cloud storage)
    ):
        importlib.import_module(module)

    factory = REGISTRY.get(name)
    if factory is None:
        raise InvalidOption(f"unknown format {name!r}; known formats: {', '.join(sorted(REGISTRY))}")
    return factory()
