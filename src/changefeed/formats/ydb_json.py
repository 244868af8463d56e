"""YDB changefeed JSON records (format ``ydb-json``).

One record per change row (one transaction's net change to one key)::

    {"key":[..],"update":{..}|"erase":{},"newImage":{..},"oldImage":{..},"ts":[step,txId]}

* ``key``: the primary key values, in key order; always present. The message key is the same
  array as JSON text (``[1,"one"]``).
* ``erase: {}`` when the row is gone afterwards, else ``update``: in UPDATES mode the non-key
  columns the transaction wrote (every non-key column for an initial-scan row), otherwise ``{}``.
* ``newImage`` (NEW_IMAGE, NEW_AND_OLD_IMAGES): all non-key columns after, unless erased.
* ``oldImage`` (OLD_IMAGE, NEW_AND_OLD_IMAGES): all non-key columns before, when the row existed
  (never on initial-scan rows).
* ``ts``: ``[commit ms, transaction id]`` with VIRTUAL_TIMESTAMPS.

Records are compact JSON with the fields in that order; values render as in
:mod:`changefeed.formats.values`. A barrier (``BARRIERS_INTERVAL``, formerly
``RESOLVED_TIMESTAMPS``) is ``{"resolved":[step,0]}``: the step a multiple of the interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.feeds.spec import Mode, barrier_of
from changefeed.formats import values as V
from changefeed.formats.base import Encoder, Record, register

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec

NEW_MODES = (Mode.NEW_IMAGE, Mode.NEW_AND_OLD_IMAGES)
OLD_MODES = (Mode.OLD_IMAGE, Mode.NEW_AND_OLD_IMAGES)
NS_PER_MS = 1_000_000


def session_tz(df: DataFrame) -> str:
    return str(df.sparkSession.conf.get("spark.sql.session.timeZone"))


def spark_output(df: DataFrame, key: Column, value: Column, partitions: int) -> DataFrame:
    """The encoder output shape from key and value JSON text columns."""
    from pyspark.sql import functions as F

    keyed = df.select(key.alias("_k"), value.alias("_v"), F.col("ts").alias("_ts"))
    return keyed.select(
        F.pmod(F.xxhash64(F.col("_k")), F.lit(partitions)).cast("int").alias("partition"),
        F.col("_k").cast("binary").alias("key"),
        F.col("_v").cast("binary").alias("value"),
        F.col("_ts").cast("long").alias("ts"),
    )


class YdbJsonEncoder(Encoder):
    name = "ydb-json"

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from pyspark.sql import functions as F

        tz = session_tz(df)
        keys, vals = table.key, table.stored_values
        prefixes = V.member_prefixes([c.name for c in vals])
        op, ox = F.col("op"), F.col("ox")
        key = F.concat(
            F.lit("["), F.concat_ws(",", *[V.spark_value(F.col(c.db), c.type, tz) for c in keys]), F.lit("]")
        )
        if feed.mode is Mode.UPDATES:
            new = [V.spark_value(F.col(c.db), c.type, tz) for c in vals]
            written = [F.coalesce(F.col(f"u{c.id}"), F.lit(False)) | (op == CHANGE_SNAPSHOT) for c in vals]
            update = F.concat(F.lit('"update":'), V.spark_partial_object(prefixes, new, written))
        else:
            update = F.lit('"update":{}')
        parts = [
            F.concat(F.lit('{"key":'), key),
            F.when(op == CHANGE_ERASE, F.lit('"erase":{}')).otherwise(update),
        ]
        if feed.mode in NEW_MODES:
            new_obj = V.spark_object(prefixes, [V.spark_value(F.col(c.db), c.type, tz) for c in vals])
            parts.append(F.when(op != CHANGE_ERASE, F.concat(F.lit('"newImage":'), new_obj)))
        if feed.mode in OLD_MODES:
            old_obj = V.spark_object(prefixes, [V.spark_value(F.col(f"o{c.id}"), c.type, tz) for c in vals])
            parts.append(F.when(ox & (op != CHANGE_SNAPSHOT), F.concat(F.lit('"oldImage":'), old_obj)))
        if feed.virtual_timestamps:
            step = F.expr(f"`ts` div {NS_PER_MS}").cast("string")
            parts.append(F.concat(F.lit('"ts":['), step, F.lit(","), F.col("tx").cast("string"), F.lit("]")))
        value = F.concat(F.concat_ws(",", *parts), F.lit("}"))
        return spark_output(df, key, value, feed.partitions)

    # ------------------------------------------------------------------ Python
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        n = batch.num_rows
        if n == 0:
            return []
        keys, vals = table.key, table.stored_values
        prefixes = V.member_prefixes([c.name for c in vals])
        key_cols = [V.python_values(batch.column(c.db), c.type) for c in keys]
        key_json = ["[" + ",".join(row) + "]" for row in zip(*key_cols, strict=True)]
        ops: list[int] = batch.column("op").to_pylist()
        oxs: list[bool] = batch.column("ox").to_pylist()
        tss: list[int] = batch.column("ts").to_pylist()
        txs: list[int] = batch.column("tx").to_pylist()
        mode = feed.mode
        new_vals: list[list[str]] = []
        if mode is Mode.UPDATES or mode in NEW_MODES:
            new_vals = [V.python_values(batch.column(c.db), c.type) for c in vals]
        updates: list[str] | None = None
        if mode is Mode.UPDATES:
            members = [[p + v for v in col] for p, col in zip(prefixes, new_vals, strict=True)]
            flags = [batch.column(f"u{c.id}").to_pylist() for c in vals]
            updates = []
            rows: Iterable[tuple[str, ...]] = zip(*members, strict=True) if members else [()] * n
            for i, row in enumerate(rows):
                if ops[i] == CHANGE_SNAPSHOT:
                    updates.append(',"update":{' + ",".join(row) + "}")
                else:
                    updates.append(
                        ',"update":{' + ",".join(m for m, f in zip(row, flags, strict=True) if f[i]) + "}"
                    )
        new_obj = V.python_object(prefixes, new_vals, n) if mode in NEW_MODES else None
        old_obj = None
        if mode in OLD_MODES:
            old_vals = [V.python_values(batch.column(f"o{c.id}"), c.type) for c in vals]
            old_obj = V.python_object(prefixes, old_vals, n)
        # Assemble column-wise: one list of pieces per field, then one concatenation per row.
        upd = updates if updates is not None else [',"update":{}'] * n
        if new_obj is not None:
            upd = [u + ',"newImage":' + o for u, o in zip(upd, new_obj, strict=True)]
        flag = [',"erase":{}' if op == CHANGE_ERASE else u for op, u in zip(ops, upd, strict=True)]
        if old_obj is not None:
            old = [
                ',"oldImage":' + o if ox and op != CHANGE_SNAPSHOT else ""
                for o, ox, op in zip(old_obj, oxs, ops, strict=True)
            ]
            flag = [f + o for f, o in zip(flag, old, strict=True)]
        if feed.virtual_timestamps:
            flag = [f'{f},"ts":[{t // NS_PER_MS},{x}]' for f, t, x in zip(flag, tss, txs, strict=True)]
        return V.records(
            key_json, ['{"key":' + k + f + "}" for k, f in zip(key_json, flag, strict=True)], tss, feed
        )

    # ------------------------------------------------------------------ resolved
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        # YDB's barrier (BARRIERS_INTERVAL): the closed timestamp's step rounded down to a whole
        # number of intervals, transaction id 0 (``{"resolved":[1670792500000,0]}``)
        if feed.resolved_ns:
            ts, tx = barrier_of(ts, feed.resolved_ns), 0
        step, tx_id = ts.ydb(tx)
        return f'{{"resolved":[{step},{tx_id}]}}'.encode()


@register("ydb-json")
def _factory() -> Encoder:
    return YdbJsonEncoder()
