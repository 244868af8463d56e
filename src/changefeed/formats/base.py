"""The encoder seam: change rows in, (partition, key, value, ts) records out.

An encoder has two faces that must agree byte for byte:

* ``encode_spark(df, table, feed)``: Spark column expressions (JVM-side, vectorised) over a
  DataFrame of change rows (see ``changefeed.engine.changes`` for its columns), returning a
  DataFrame with columns ``partition int, key binary, value binary, ts long``;
* ``encode_python(batch, table, feed)``: the same records from a pyarrow RecordBatch in plain
  Python, the reference used by tests and by the single-process baseline.

Encoders are pure: no clock, no I/O. ``resolved(...)`` builds a resolved-timestamp record value.
Implementations register themselves in :data:`REGISTRY` by format name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

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


def partition_of(key: bytes, partitions: int) -> int:
    """Topic partition of a message key; equals Spark's ``pmod(xxhash64(key), n)``."""
    h = xxhash.xxh64_intdigest(key, seed=42)
    if h >= 1 << 63:
        h -= 1 << 64
    return h % partitions


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
    ):
        importlib.import_module(module)

    factory = REGISTRY.get(name)
    if factory is None:
        raise InvalidOption(f"unknown format {name!r}; known formats: {', '.join(sorted(REGISTRY))}")
    return factory()
