"""YDB's Debezium-compatible JSON records (format ``debezium-json``).

Value, one per change row::

    {"payload":{"op":"u","before":{..},"after":{..},
                "source":{"connector":"ydb","version":"1.0.0","ts_ms":..,"step":..,"txId":..,"snapshot":false}}}

* ``op``: ``r`` for initial-scan rows, ``d`` for erases, ``c`` in NEW_AND_OLD_IMAGES mode when the
  row did not exist before, otherwise ``u`` (YDB cannot tell an insert from an update elsewhere).
* ``before`` (OLD_IMAGE, NEW_AND_OLD_IMAGES): the whole row before the change, key columns
  included (Debezium convention; YDB adds the key to the image too), in table column order;
  absent (not ``null``) when the row did not exist, and on initial-scan rows.
* ``after`` (NEW_IMAGE, NEW_AND_OLD_IMAGES): the whole row after the change, key included; absent
  on erases. KEYS_ONLY and UPDATES records carry neither.
* ``source``: ``ts_ms`` and ``step`` are the commit time in milliseconds, ``txId`` the transaction
  id (for initial-scan rows: the snapshot's), ``snapshot`` true for initial-scan rows.

Message key: ``{"payload":{<key column>: <value>, ...}}``. Resolved records (not defined by YDB
for this format) are ``{"payload":{"resolved":[step,txId]}}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.feeds.spec import Mode, barrier_of
from changefeed.formats import values as V
from changefeed.formats.base import Encoder, Record, register
from changefeed.formats.ydb_json import NEW_MODES, NS_PER_MS, OLD_MODES, session_tz, spark_output

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from changefeed.engine.catalog import TableSchema
    from changefeed.engine.clock import CommitTs
    from changefeed.feeds.spec import FeedSpec

CONNECTOR = "ydb"
VERSION = "1.0.0"
_SOURCE_HEAD = f',"source":{{"connector":"{CONNECTOR}","version":"{VERSION}","ts_ms":'


class DebeziumJsonEncoder(Encoder):
    name = "debezium-json"

    # ------------------------------------------------------------------ Spark
    def encode_spark(self, df: DataFrame, table: TableSchema, feed: FeedSpec) -> DataFrame:
        from pyspark.sql import functions as F

        tz = session_tz(df)
        keys, cols = table.key, table.stored
        op, ox = F.col("op"), F.col("ox")
        key = F.concat(
            F.lit('{"payload":'),
            V.spark_object(
                V.member_prefixes([c.name for c in keys]),
                [V.spark_value(F.col(c.db), c.type, tz) for c in keys],
            ),
            F.lit("}"),
        )
        prefixes = V.member_prefixes([c.name for c in cols])
        code = F.when(op == CHANGE_SNAPSHOT, F.lit("r")).when(op == CHANGE_ERASE, F.lit("d"))
        if feed.mode is Mode.NEW_AND_OLD_IMAGES:
            code = code.when(~ox, F.lit("c"))
        parts = [F.concat(F.lit('{"payload":{"op":"'), code.otherwise(F.lit("u")), F.lit('"'))]
        if feed.mode in OLD_MODES:
            old = [V.spark_value(F.col(c.db if c.is_key else f"o{c.id}"), c.type, tz) for c in cols]
            obj = V.spark_object(prefixes, old)
            parts.append(
                F.when(ox & (op != CHANGE_SNAPSHOT), F.concat(F.lit(',"before":'), obj)).otherwise(F.lit(""))
            )
        if feed.mode in NEW_MODES:
            obj = V.spark_object(prefixes, [V.spark_value(F.col(c.db), c.type, tz) for c in cols])
            parts.append(F.when(op != CHANGE_ERASE, F.concat(F.lit(',"after":'), obj)).otherwise(F.lit("")))
        ms = F.expr(f"`ts` div {NS_PER_MS}").cast("string")
        snapshot = F.when(op == CHANGE_SNAPSHOT, F.lit("true")).otherwise(F.lit("false"))
        parts += [
            F.lit(_SOURCE_HEAD),
            ms,
            F.lit(',"step":'),
            ms,
            F.lit(',"txId":'),
            F.col("tx").cast("string"),
            F.lit(',"snapshot":'),
            snapshot,
            F.lit("}}}"),
        ]
        return spark_output(df, key, F.concat(*parts), feed.partitions)

    # ------------------------------------------------------------------ Python
    def encode_python(self, batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec) -> list[Record]:
        n = batch.num_rows
        if n == 0:
            return []
        keys, cols = table.key, table.stored
        key_prefixes = V.member_prefixes([c.name for c in keys])
        key_vals = [V.python_values(batch.column(c.db), c.type) for c in keys]
        key_json = ['{"payload":' + o + "}" for o in V.python_object(key_prefixes, key_vals, n)]
        prefixes = V.member_prefixes([c.name for c in cols])
        mode = feed.mode
        before = after = None
        if mode in OLD_MODES:
            old = [V.python_values(batch.column(c.db if c.is_key else f"o{c.id}"), c.type) for c in cols]
            before = V.python_object(prefixes, old, n)
        if mode in NEW_MODES:
            new = [V.python_values(batch.column(c.db), c.type) for c in cols]
            after = V.python_object(prefixes, new, n)
        ops: list[int] = batch.column("op").to_pylist()
        oxs: list[bool] = batch.column("ox").to_pylist()
        tss: list[int] = batch.column("ts").to_pylist()
        txs: list[int] = batch.column("tx").to_pylist()
        creates = mode is Mode.NEW_AND_OLD_IMAGES
        # Assemble column-wise: one list of pieces per field, then one concatenation per row.
        heads = [
            '{"payload":{"op":"r"'
            if op == CHANGE_SNAPSHOT
            else '{"payload":{"op":"d"'
            if op == CHANGE_ERASE
            else '{"payload":{"op":"c"'
            if creates and not ox
            else '{"payload":{"op":"u"'
            for op, ox in zip(ops, oxs, strict=True)
        ]
        if before is not None:
            heads = [
                h + ',"before":' + b if ox and op != CHANGE_SNAPSHOT else h
                for h, b, ox, op in zip(heads, before, oxs, ops, strict=True)
            ]
        if after is not None:
            heads = [
                h if op == CHANGE_ERASE else h + ',"after":' + a
                for h, a, op in zip(heads, after, ops, strict=True)
            ]
        tails = [
            f'{_SOURCE_HEAD}{t // NS_PER_MS},"step":{t // NS_PER_MS},"txId":{x},"snapshot":'
            + ("true}}}" if op == CHANGE_SNAPSHOT else "false}}}")
            for t, x, op in zip(tss, txs, ops, strict=True)
        ]
        return V.records(key_json, [h + t for h, t in zip(heads, tails, strict=True)], tss, feed)

    # ------------------------------------------------------------------ resolved
    def resolved(self, ts: CommitTs, tx: int, feed: FeedSpec) -> bytes:
        # YDB's barrier (BARRIERS_INTERVAL): the closed timestamp's step rounded down to a whole
        # number of intervals, transaction id 0 (``{"resolved":[1670792500000,0]}``)
        if feed.resolved_ns:
            ts, tx = barrier_of(ts, feed.resolved_ns), 0
        step, tx_id = ts.ydb(tx)
        return f'{{"payload":{{"resolved":[{step},{tx_id}]}}}}'.encode()


@register("debezium-json")
def _factory() -> Encoder:
    return DebeziumJsonEncoder()
