"""Column families in CockroachDB changefeed jobs: which change rows a family feed delivers.

A job's target ``TABLE t FAMILY f``, or every family of ``t`` with ``split_column_families``, is
one feed per family (topic ``t.f``, ``FeedSpec.family``). Its streaming query reads the table's
whole change stream; :func:`family_frame` keeps the rows that give a message for that family,
the Spark face of :func:`changefeed.formats.crdb_json.family_rows` (what core changefeeds use):

* a delete gives a message in every family;
* an insert (or an initial-scan / backfill row) in the primary (first) family, and in another
  family when one of that family's columns is set;
* an update in the families whose columns it wrote.

The encoder then renders only the family's columns (``Layout.of`` reads ``FeedSpec.family``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.formats.crdb_json import families, family_of, family_rows

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.feeds.spec import FeedSpec


def family_condition(table: TableSchema, family: str) -> Column:
    """Whether a change row gives a message for ``family`` (a Spark boolean column)."""
    from pyspark.sql import functions as F

    cols = [c for c in table.stored if not c.is_key and family_of(c) == family]
    op = F.col("op")
    erased = op == F.lit(CHANGE_ERASE)
    created = (op == F.lit(CHANGE_SNAPSHOT)) | ~F.col("ox")
    on_create: Column
    if family == families(table)[0]:
        on_create = F.lit(True)
    else:
        on_create = F.lit(False)
        for c in cols:
            on_create = on_create | F.col(c.db).isNotNull()
    written: Column = F.lit(False)
    for c in cols:
        written = written | F.coalesce(F.col(f"u{c.id}"), F.lit(False))
    return erased | F.when(created, on_create).otherwise(written)


def family_frame(df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
    """The change rows ``feed`` delivers: all of them, or its column family's."""
    if feed.family is None:
        return df
    return df.filter(family_condition(table, feed.family))


def family_batch(batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> pa.RecordBatch:
    """:func:`family_frame` of an Arrow batch."""
    if feed.family is None:
        return batch
    return batch.filter(family_rows(batch, table, feed.family))


__all__ = ["family_batch", "family_condition", "family_frame"]
