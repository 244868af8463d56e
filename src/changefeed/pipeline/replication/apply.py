"""Applying a replication's changefeed records to its replicas, exactly once (issue 20).

The apply is one destination transaction per micro-batch, made with ``replica_writer=True`` (the
only writer replicas accept). It takes the records read from the source's changefeed topics
(column-wise: item, partition, offset, time, value) and, partition by partition in offset order:

1. skips every record below its partition's ``next_offset`` (``_replication_offsets``): those
   were applied or buffered by an earlier transaction, so a replayed or re-read batch changes
   nothing, and a restart from the recorded offsets loses nothing;
2. decodes each record (:mod:`changefeed.formats.ydb_decode`); a barrier raises its partition's
   barrier, a change its partition's newest commit time;
3. ``ROW``: applies the changes at once, per key in the order they arrived (several changes of one
   key in a batch collapse to their net effect: the last erase, then the columns written since);
4. ``GLOBAL``: the replication's barrier is the minimum over every partition of every item of
   the newest barrier received there. Changes below it (step < barrier) are all here: each
   partition sends its barrier after every change below it. When it advances, every change below
   it — buffered by earlier batches or in this one — is applied, and the rest buffered
   (``_replication_buffer``); so between commits the replicas always hold the source as it was at
   a barrier, across all items, and a reader's snapshot sees one barrier or the next;
5. advances ``next_offset`` past every record it took and records the barrier applied, the
   changes applied and the lag, in the same transaction.

Nothing is applied unless the replication is ``Running``: a paused or done replication's batch
leaves everything as it was (its records are read again when it resumes).
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.database import Database
from changefeed.engine.storage import OP_UPDATE
from changefeed.engine.txn import Transaction
from changefeed.exceptions import ReplicationError, TypeMismatch
from changefeed.feeds import replication as R
from changefeed.formats.ydb_decode import BARRIER, ERASE, RecordDecoder

NS_PER_MS = 1_000_000
#: GLOBAL: at most this many buffered changes are also kept parsed in memory.
PARSED_CACHE = 1_000_000

#: A key's net effect in a batch: [erased before the last writes, gone at the end, columns written
#: since the last erase]. Mutable lists: folded in place, record by record.
Net = list[Any]
Nets = dict[tuple[Any, ...], Net]


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """One record read from a source changefeed topic."""

    item: int
    partition: int
    offset: int
    ts: int  # the record's commit time (wall ns): YDB's created_at
    value: bytes


@dataclass
class ApplyResult:
    applied: int = 0  # changes applied to replicas (several of one key may be one row write)
    buffered: int = 0  # GLOBAL: changes kept for a later barrier
    skipped: int = 0  # records below next_offset
    barrier: int | None = None  # GLOBAL: the barrier (wall ns) applied now, if it advanced
    paused: bool = False  # the replication was not running: nothing done


def fold(nets: Nets, key: tuple[Any, ...], erase: bool, cells: dict[int, Any]) -> None:
    """Add one change of ``key`` (in order) to the net effects."""
    net = nets.get(key)
    if erase:
        nets[key] = [True, True, {}]
    elif net is None:
        nets[key] = [False, False, cells]
    else:
        net[1] = False
        net[2].update(cells)


def write_net(txn: Transaction, schema: TableSchema, nets: Nets) -> int:
    """Write the net effects to one replica, in bulk: deletes, replaced rows (an erase then
    writes: every value column set, unwritten ones to NULL), and upserts of the written columns."""
    deletes: list[tuple[Any, ...]] = []
    groups: dict[tuple[int, ...], list[tuple[tuple[Any, ...], dict[int, Any]]]] = defaultdict(list)
    value_ids = tuple(c.id for c in schema.stored_values)
    for key, (erased, gone, cells) in nets.items():
        if gone:
            deletes.append(key)
        elif erased:
            groups[value_ids].append((key, cells))
        else:
            groups[tuple(cells)].append((key, cells))  # column order as the record wrote them
    if deletes:
        txn.delete_rows(schema, deletes, olds={})
    for ids, rows in groups.items():
        keys = [k for k, _ in rows]
        get = [c.get for _, c in rows]
        columns = {i: [g(i) for g in get] for i in ids}
        txn.write_rows(schema, keys, columns, marker=True, op=OP_UPDATE, olds={})
    return len(nets)


class Applier:
    """Applies batches of one replication's records on its destination database."""

    def __init__(self, db: Database, replication_id: int) -> None:
        self.db = db
        self.rid = replication_id
        self._decoders: dict[int, tuple[TableSchema, RecordDecoder, int]] = {}
        #: GLOBAL: buffered changes, parsed: (item, partition, offset) -> (key, erase, cells)
        self._parsed: dict[tuple[int, int, int], tuple[tuple[Any, ...], bool, dict[int, Any]]] = {}

    def _decoder(self, item: R.Item) -> tuple[TableSchema, RecordDecoder]:
        try:
            schema = self.db.table_by_id(item.target_table_id)
        except Exception:
            raise ReplicationError(
                f"replica {item.target_name} of {item.source_path} no longer exists"
            ) from None
        cached = self._decoders.get(item.item_id)
        if cached is None or cached[2] != schema.version:
            cached = (schema, RecordDecoder(schema), schema.version)
            self._decoders[item.item_id] = cached
        return cached[0], cached[1]

    def apply(self, records: Sequence[SourceRecord], now_ns: int | None = None) -> ApplyResult:
        return self.apply_columns(
            [r.item for r in records],
            [r.partition for r in records],
            [r.offset for r in records],
            [r.ts for r in records],
            [r.value for r in records],
            now_ns,
        )

    def apply_columns(
        self,
        items: Sequence[int],
        partitions: Sequence[int],
        offsets: Sequence[int],
        tss: Sequence[int],
        values: Sequence[bytes],
        now_ns: int | None = None,
    ) -> ApplyResult:
        txn = Transaction(self.db, write=True, replica_writer=True)
        try:
            res = self._apply(txn, items, partitions, offsets, tss, values, now_ns)
        except BaseException:
            txn.rollback()
            raise
        if res.paused:
            txn.rollback()
        else:
            txn.commit()
        return res

    def _apply(
        self,
        txn: Transaction,
        items: Sequence[int],
        partitions: Sequence[int],
        offsets: Sequence[int],
        tss: Sequence[int],
        values: Sequence[bytes],
        now_ns: int | None,
    ) -> ApplyResult:
        conn = txn.conn
        rep = R.get(conn, self.rid)
        res = ApplyResult()
        if rep is None or rep.state != R.RUNNING:
            res.paused = True
            return res
        by_id = {it.item_id: it for it in rep.items}
        pos = R.positions(conn, self.rid)
        nexts = {k: p.next_offset for k, p in pos.items()}
        barriers = {k: p.barrier for k, p in pos.items()}
        newest = {k: p.newest for k, p in pos.items()}
        decoders = {i: self._decoder(it)[1] for i, it in by_id.items()}
        # each (item, partition)'s records, in offset order
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, k in enumerate(zip(items, partitions)):  # noqa: B905
            groups[k].append(i)
        glob = rep.spec.global_
        nets: dict[int, Nets] = defaultdict(dict)
        counts: dict[int, int] = defaultdict(int)
        # GLOBAL: this batch's changes, parsed: (step, item, kind, key, cells, index in the batch)
        pending: list[tuple[int, int, int, tuple[Any, ...], dict[int, Any], int]] = []
        oldest_ts: int | None = None
        for k, idx in groups.items():
            if k not in nexts:
                raise ReplicationError(
                    f"asynchronous replication {rep.name}: a record of item {k[0]} partition {k[1]},"
                    " which the replication does not have"
                )
            if any(offsets[a] > offsets[b] for a, b in itertools.pairwise(idx)):
                idx.sort(key=offsets.__getitem__)
            item, part = k
            dec = decoders[item]
            topic = by_id[item].topic
            inet = nets[item]
            nxt = nexts[k]
            hi_ts, lo_ts, bar = newest[k], oldest_ts, barriers[k]
            folded = 0
            for i in idx:
                off = offsets[i]
                if off < nxt:
                    res.skipped += 1
                    continue
                nxt = off + 1
                try:
                    kind, key, cells, step = dec.parse(orjson.loads(values[i]))
                except (TypeMismatch, orjson.JSONDecodeError) as exc:
                    raise ReplicationError(
                        f"asynchronous replication {rep.name}: {topic} partition {part} offset {off}: {exc}"
                    ) from None
                if kind == BARRIER:
                    if step is not None and step * NS_PER_MS > bar:
                        bar = step * NS_PER_MS
                    continue
                ts = tss[i]
                if ts > hi_ts:
                    hi_ts = ts
                if lo_ts is None or ts < lo_ts:
                    lo_ts = ts
                if glob:
                    pending.append((step if step is not None else ts // NS_PER_MS, item, kind, key, cells, i))
                    continue
                # ROW: fold (inlined) the change into the key's net effect
                net = inet.get(key)
                if kind == ERASE:
                    inet[key] = [True, True, {}]
                elif net is None:
                    inet[key] = [False, False, cells]
                else:
                    net[1] = False
                    net[2].update(cells)
                folded += 1
            nexts[k], newest[k], barriers[k], oldest_ts = nxt, hi_ts, bar, lo_ts
            counts[item] += folded
        now = now_ns if now_ns is not None else time.time_ns()
        applied_wall = rep.applied_wall
        if glob:
            barrier = min(barriers.values()) if barriers else 0
            if barrier > applied_wall:
                cut = barrier // NS_PER_MS
                # changes below the barrier: first those buffered by earlier batches (lower
                # offsets), then this batch's; the rest waits for a later barrier
                parsed = self._parsed
                for item, part, off, value in conn.execute(
                    "SELECT item_id, partition, offset, value FROM _replication_buffer"
                    " WHERE replication_id = ? AND ts < ? ORDER BY item_id, partition, offset",
                    (self.rid, cut),
                ):
                    got = parsed.pop((item, part, off), None)
                    if got is None:
                        kind, key, cells, _ = decoders[item].parse(orjson.loads(value))
                        got = (key, kind == ERASE, cells)
                    fold(nets[item], *got)
                    counts[item] += 1
                conn.execute(
                    "DELETE FROM _replication_buffer WHERE replication_id = ? AND ts < ?", (self.rid, cut)
                )
                later = []
                for p in pending:
                    if p[0] < cut:
                        fold(nets[p[1]], p[3], p[2] == ERASE, p[4])
                        counts[p[1]] += 1
                    else:
                        later.append(p)
                applied_wall = barrier
                res.barrier = barrier
            else:
                later = pending
            # buffered: kept parsed here too (a record at an offset never changes), so the barrier
            # that applies them does not decode them again; after a restart they are decoded then
            cache = self._parsed
            room = PARSED_CACHE - len(cache)
            buffer_rows = []
            for at, item, kind, key, cells, i in later:
                part, off = partitions[i], offsets[i]
                buffer_rows.append((self.rid, item, part, off, at, values[i]))
                if room > 0:
                    cache[(item, part, off)] = (key, kind == ERASE, cells)
                    room -= 1
            if buffer_rows:
                conn.executemany("INSERT INTO _replication_buffer VALUES (?, ?, ?, ?, ?, ?)", buffer_rows)
                res.buffered = len(buffer_rows)
        for item, inets in nets.items():
            if inets:
                schema, _ = self._decoder(by_id[item])
                write_net(txn, schema, inets)
            res.applied += counts[item]
        if not glob and oldest_ts is not None:
            applied_wall = max(applied_wall, max(newest.values()))
        conn.executemany(
            "UPDATE _replication_offsets SET next_offset = ?, barrier = ?, newest = ?"
            " WHERE replication_id = ? AND item_id = ? AND partition = ?",
            [(nexts[k], barriers[k], newest[k], self.rid, k[0], k[1]) for k in groups if k in nexts],
        )
        lag = max(0, now - oldest_ts) if oldest_ts is not None and not glob else 0
        conn.execute(
            "UPDATE _replications SET applied_wall = ?, applied_ns = ?, applied_rows = applied_rows + ?,"
            " lag_ns = ? WHERE id = ?",
            (applied_wall, now, res.applied, lag, self.rid),
        )
        return res


def records_from_arrow(table: Any) -> list[SourceRecord]:
    """Records of an Arrow table with columns item, partition, offset, ts, value."""
    cols = [table.column(n).to_pylist() for n in ("item", "partition", "offset", "ts", "value")]
    return [
        SourceRecord(int(i), int(p), int(o), int(t), bytes(v)) for i, p, o, t, v in zip(*cols, strict=True)
    ]


def apply_arrow(applier: Applier, table: Any, now_ns: int | None = None) -> ApplyResult:
    """Apply an Arrow table of records (the Spark query's micro-batch), column-wise."""
    return applier.apply_columns(
        table.column("item").to_pylist(),
        table.column("partition").to_pylist(),
        table.column("offset").to_pylist(),
        table.column("ts").to_pylist(),
        table.column("value").to_pylist(),
        now_ns,
    )


__all__ = ["Applier", "ApplyResult", "SourceRecord", "apply_arrow", "fold", "records_from_arrow", "write_net"]
