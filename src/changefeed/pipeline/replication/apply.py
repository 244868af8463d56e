"""Applying a replication's changefeed records to its replicas, exactly once (issue 20).

The apply is one destination transaction per micro-batch, made with ``replica_writer=True`` (the
only writer replicas accept). It takes the records read from the source's changefeed topics, in
(item, partition, offset) order, and:

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
   rows and the lag, in the same transaction.

Nothing is applied unless the replication is ``Running``: a paused or done replication's batch
leaves everything as it was (its records are read again when it resumes).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.engine.database import Database
from changefeed.engine.storage import OP_UPDATE
from changefeed.engine.txn import Transaction
from changefeed.exceptions import ReplicationError, TypeMismatch
from changefeed.feeds import replication as R
from changefeed.formats.ydb_decode import Barrier, Change, RecordDecoder

NS_PER_MS = 1_000_000


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


@dataclass
class _Net:
    """The net effect of a key's changes in order: an erase, then the columns written since."""

    erased: bool = False
    gone: bool = False
    cells: dict[int, Any] = field(default_factory=dict)

    def add(self, c: Change) -> None:
        if c.erase:
            self.erased, self.gone = True, True
            self.cells = {}
        else:
            self.gone = False
            self.cells.update(c.cells)


def collapse(changes: Iterable[Change]) -> dict[tuple[Any, ...], _Net]:
    out: dict[tuple[Any, ...], _Net] = {}
    for c in changes:
        net = out.get(c.key)
        if net is None:
            net = out[c.key] = _Net()
        net.add(c)
    return out


def write_net(txn: Transaction, schema: TableSchema, nets: dict[tuple[Any, ...], _Net]) -> int:
    """Write the net effects to one replica, in bulk: deletes, replaced rows (an erase then
    writes: every value column set, unwritten ones to NULL), and upserts of the written columns."""
    deletes: list[tuple[Any, ...]] = []
    groups: dict[tuple[int, ...], list[tuple[tuple[Any, ...], dict[int, Any]]]] = defaultdict(list)
    value_ids = tuple(c.id for c in schema.stored_values)
    for key, net in nets.items():
        if net.gone:
            deletes.append(key)
        elif net.erased:
            groups[value_ids].append((key, net.cells))
        elif net.cells:
            groups[tuple(sorted(net.cells))].append((key, net.cells))
        else:
            groups[()].append((key, net.cells))  # a row of key columns only
    if deletes:
        txn.delete_rows(schema, deletes, olds={})
    for ids, rows in groups.items():
        keys = [k for k, _ in rows]
        columns = {i: [cells.get(i) for _, cells in rows] for i in ids}
        txn.write_rows(schema, keys, columns, marker=True, op=OP_UPDATE, olds={})
    return len(nets)


class Applier:
    """Applies batches of one replication's records on its destination database."""

    def __init__(self, db: Database, replication_id: int) -> None:
        self.db = db
        self.rid = replication_id
        self._decoders: dict[int, tuple[TableSchema, RecordDecoder, int]] = {}

    def _decoder(self, item: R.Item) -> tuple[TableSchema, RecordDecoder]:
        schema = self.db.table_by_id(item.target_table_id)
        cached = self._decoders.get(item.item_id)
        if cached is None or cached[2] != schema.version:
            cached = (schema, RecordDecoder(schema), schema.version)
            self._decoders[item.item_id] = cached
        return cached[0], cached[1]

    def apply(self, records: Sequence[SourceRecord], now_ns: int | None = None) -> ApplyResult:
        txn = Transaction(self.db, write=True, replica_writer=True)
        try:
            res = self._apply(txn, records, now_ns)
        except BaseException:
            txn.rollback()
            raise
        if res.paused:
            txn.rollback()
        else:
            txn.commit()
        return res

    def _apply(self, txn: Transaction, records: Sequence[SourceRecord], now_ns: int | None) -> ApplyResult:
        conn = txn.conn
        rep = R.get(conn, self.rid)
        res = ApplyResult()
        if rep is None or rep.state != R.RUNNING:
            res.paused = True
            return res
        items = {it.item_id: it for it in rep.items}
        pos = R.positions(conn, self.rid)
        nexts = {k: p.next_offset for k, p in pos.items()}
        barriers = {k: p.barrier for k, p in pos.items()}
        newest = {k: p.newest for k, p in pos.items()}
        changes: dict[int, list[tuple[int, int, Change]]] = defaultdict(list)  # item -> (p, offset, change)
        buffer_rows: list[tuple[int, int, int, int, int, bytes]] = []
        oldest_ts: int | None = None
        for r in sorted(records, key=lambda x: (x.item, x.partition, x.offset)):
            k = (r.item, r.partition)
            if k not in nexts:
                raise ReplicationError(
                    f"asynchronous replication {rep.name}: a record of item {r.item} partition {r.partition},"
                    " which the replication does not have"
                )
            if r.offset < nexts[k]:
                res.skipped += 1
                continue
            nexts[k] = r.offset + 1
            item = items[r.item]
            _, dec = self._decoder(item)
            try:
                got = dec.decode(r.value)
            except TypeMismatch as exc:
                raise ReplicationError(
                    f"asynchronous replication {rep.name}: {item.topic} partition {r.partition} offset {r.offset}: {exc}"
                ) from None
            if isinstance(got, Barrier):
                barriers[k] = max(barriers[k], got.step * NS_PER_MS)
                continue
            newest[k] = max(newest[k], r.ts)
            oldest_ts = r.ts if oldest_ts is None else min(oldest_ts, r.ts)
            if rep.spec.global_:
                step = got.ts[0] if got.ts is not None else r.ts // NS_PER_MS
                buffer_rows.append((self.rid, r.item, r.partition, r.offset, step, r.value))
            else:
                changes[r.item].append((r.partition, r.offset, got))
        now = now_ns if now_ns is not None else time.time_ns()
        applied_wall = rep.applied_wall
        if rep.spec.global_:
            barrier = min(barriers.values()) if barriers else 0
            if barrier > applied_wall:
                cut_step = barrier // NS_PER_MS
                # this batch's changes below the barrier go straight to the replicas
                for row in buffer_rows:
                    if row[4] < cut_step:
                        item = items[row[1]]
                        changes[row[1]].append((row[2], row[3], self._decode_change(item, row[5])))
                buffer_rows = [row for row in buffer_rows if row[4] >= cut_step]
                for item_id, part, off, value in conn.execute(
                    "SELECT item_id, partition, offset, value FROM _replication_buffer"
                    " WHERE replication_id = ? AND ts < ? ORDER BY item_id, partition, offset",
                    (self.rid, cut_step),
                ):
                    changes[int(item_id)].append(
                        (int(part), int(off), self._decode_change(items[int(item_id)], value))
                    )
                conn.execute(
                    "DELETE FROM _replication_buffer WHERE replication_id = ? AND ts < ?",
                    (self.rid, cut_step),
                )
                applied_wall = barrier
                res.barrier = barrier
            if buffer_rows:
                conn.executemany("INSERT INTO _replication_buffer VALUES (?, ?, ?, ?, ?, ?)", buffer_rows)
                res.buffered = len(buffer_rows)
        for item_id, entries in changes.items():
            entries.sort(key=lambda e: (e[0], e[1]))
            schema, _ = self._decoder(items[item_id])
            write_net(txn, schema, collapse(e[2] for e in entries))
            res.applied += len(entries)
        if not rep.spec.global_ and oldest_ts is not None:
            applied_wall = max(applied_wall, max(newest.values()))
        conn.executemany(
            "UPDATE _replication_offsets SET next_offset = ?, barrier = ?, newest = ?"
            " WHERE replication_id = ? AND item_id = ? AND partition = ?",
            [(nexts[k], barriers[k], newest[k], self.rid, k[0], k[1]) for k in nexts],
        )
        lag = max(0, now - oldest_ts) if oldest_ts is not None and not rep.spec.global_ else 0
        conn.execute(
            "UPDATE _replications SET applied_wall = ?, applied_ns = ?, applied_rows = applied_rows + ?,"
            " lag_ns = ? WHERE id = ?",
            (applied_wall, now, res.applied, lag, self.rid),
        )
        return res

    def _decode_change(self, item: R.Item, value: bytes) -> Change:
        _, dec = self._decoder(item)
        got = dec.decode(value)
        assert isinstance(got, Change)
        return got


def records_from_arrow(table: Any) -> list[SourceRecord]:
    """Records of an Arrow table with columns item, partition, offset, ts, value."""
    cols = [table.column(n).to_pylist() for n in ("item", "partition", "offset", "ts", "value")]
    return [
        SourceRecord(int(i), int(p), int(o), int(t), bytes(v)) for i, p, o, t, v in zip(*cols, strict=True)
    ]


__all__ = ["Applier", "ApplyResult", "SourceRecord", "collapse", "records_from_arrow", "write_net"]
