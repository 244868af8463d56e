"""A stand-in for the ``crdb-json`` encoder, registered only while ``formats/crdb_json.py`` (built
in another branch of issue 7) is absent: wrapped envelope with ``after``, ``before`` (diff) and
``updated``, compact JSON. The job tests validate message contents by parsing them, so they hold
for the real encoder too; byte-exact CockroachDB formatting is that encoder's own tests' job."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.formats import values as V
from changefeed.formats.base import REGISTRY, Encoder, Record, register
from changefeed.formats.ydb_json import session_tz, spark_output

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec


def _flags(feed: FeedSpec) -> tuple[bool, bool]:
    raw = dict(getattr(getattr(feed, "crdb", None), "raw", ()) or ())
    crdb = getattr(feed, "crdb", None)
    diff = bool(getattr(crdb, "diff", "diff" in raw))
    updated = bool(getattr(crdb, "updated", "updated" in raw))
    if crdb is None:  # no options object yet: the feed's mode says whether diff was asked for
        from changefeed.feeds.spec import Mode

        diff = feed.mode is Mode.NEW_AND_OLD_IMAGES
        updated = True
    return diff, updated


class StandInCrdbJson(Encoder):
    name = "crdb-json"

    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from pyspark.sql import functions as F

        tz = session_tz(df)
        diff, updated = _flags(feed)
        cols = table.stored
        prefixes = V.member_prefixes([c.name for c in cols])
        op, ox = F.col("op"), F.col("ox")
        key = F.concat(
            F.lit("["),
            F.concat_ws(",", *[V.spark_value(F.col(c.db), c.type, tz) for c in table.key]),
            F.lit("]"),
        )
        new = V.spark_object(prefixes, [V.spark_value(F.col(c.db), c.type, tz) for c in cols])
        old = V.spark_object(
            prefixes, [V.spark_value(F.col(c.db if c.is_key else f"o{c.id}"), c.type, tz) for c in cols]
        )
        parts = [F.concat(F.lit('{"after":'), F.when(op == CHANGE_ERASE, F.lit("null")).otherwise(new))]
        if diff:
            before = F.when(ox & (op != CHANGE_SNAPSHOT), old).otherwise(F.lit("null"))
            parts.append(F.concat(F.lit('"before":'), before))
        if updated:
            hlc = F.concat(
                F.col("ts").cast("string"), F.lit("."), F.lpad(F.col("lg").cast("string"), 10, "0")
            )
            parts.append(F.concat(F.lit('"updated":"'), hlc, F.lit('"')))
        value = F.concat(F.concat_ws(",", *parts), F.lit("}"))
        return spark_output(df, key, value, feed.partitions)

    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        raise NotImplementedError("the stand-in encoder has only its Spark face")

    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        return f'{{"resolved":"{ts.crdb()}"}}'.encode()


def ensure_crdb_json() -> None:
    try:
        importlib.import_module("changefeed.formats.crdb_json")
    except ImportError:
        if "crdb-json" not in REGISTRY:
            register("crdb-json")(StandInCrdbJson)
