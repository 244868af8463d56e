"""``ordering = 'total'`` (this product's extension; CockroachDB orders changes per key only): a
multi-table job delivers every change of every watched table in one commit order into one topic
partition, each transaction's changes contiguous and marked, with a gapless sequence.

Each record's key is the row's CockroachDB JSON key; its value wraps the message the job's
options make (``wrapped``, ``diff``, ``updated``... as for any JSON job)::

    {"hlc": "<commit time, HLC decimal>", "key": [..], "message": {..}, "seq": 17,
     "table": "orders", "txn": 5, "txn_end": true, "txn_index": 2}

``seq`` numbers the job's changes 1, 2, 3... with no gap; ``txn`` numbers its transactions the
same way; ``txn_index`` is the change's place in its transaction (from 0) and ``txn_end`` marks
its last change. Changes of one transaction follow the job's table order, then the order the
transaction wrote them. The initial scan, if any, is transaction 1 at the job's start time
(each table's rows in key order). With ``resolved``, a CockroachDB resolved message
(``{"resolved":"<hlc>"}``, no key) follows once everything before it is delivered.

Delivery runs in the runner's process (not as Spark queries): each round reads every table's
change stream from the last delivered commit time in one SQLite snapshot, merges by commit time,
encodes column-wise (``CrdbJsonEncoder.encode_arrow``) and appends whole transactions.

Exactly once into the embedded topics: the topic itself is the progress. A round first reads the
partition's tail (the last record's ``seq``, ``txn`` and ``hlc``), resumes after it, and appends
with the topic's idempotent (writer, batch) markers, atomically; a ``kill -9`` anywhere loses or
repeats nothing. Other sinks (Kafka, webhook, cloud storage): at least once: progress is the
``_total_order`` row written after the sink acknowledged a batch, so a crash in between repeats
that batch, with the same ``seq`` numbers (consumers drop what they have seen). Each feed's
``_progress`` follows too (the job's high water; GC keeps what is not delivered yet).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import read_changes
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.feeds import jobs as J
from changefeed.feeds.crdb_options import ORDERING_TOTAL
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.formats.crdb_json import CrdbJsonEncoder, options_of
from changefeed.pipeline.delivery.progress import write_progress
from changefeed.pipeline.sinks import open_delivery
from changefeed.pipeline.sources.journal import load_table

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.topics.store import TopicStore

log = logging.getLogger(__name__)

#: Change rows read per table per round (whole transactions are always delivered together), and
#: scan rows appended per batch (``CHANGEFEED_TOTAL_ORDER_ROWS``: the kill -9 tests make batches
#: small, so that kills land between them).
ROUND_ROWS = int(os.environ.get("CHANGEFEED_TOTAL_ORDER_ROWS", 50_000))
SCAN_BATCH = ROUND_ROWS

_DDL = (
    "CREATE TABLE IF NOT EXISTS _total_order (job_id INTEGER PRIMARY KEY, wall INTEGER NOT NULL,"
    " logical INTEGER NOT NULL, seq INTEGER NOT NULL, txn INTEGER NOT NULL, scan_rows INTEGER)"
)


def is_total(job: J.Job) -> bool:
    return job.options.get("ordering") == ORDERING_TOTAL


@dataclass(slots=True)
class State:
    """Where delivery got to: the last delivered transaction's commit time, the last ``seq`` and
    ``txn`` numbers, and (during the initial scan) how many scan rows are delivered."""

    at: CommitTs
    seq: int = 0
    txn: int = 0
    scan_rows: int | None = None  # None: no scan pending


@dataclass(frozen=True, slots=True)
class _Target:
    feed: FeedSpec
    table: TableSchema


def _writer(job: J.Job) -> str:
    return f"total-order-{job.id}"


# ============================================================================ state
def _load_state(db: Path, job: J.Job, feeds: list[FeedSpec], states: list[str]) -> State:
    conn = open_sqlite(db / DB_FILE)
    try:
        conn.execute(_DDL)
        row = conn.execute(
            "SELECT wall, logical, seq, txn, scan_rows FROM _total_order WHERE job_id = ?", (job.id,)
        ).fetchone()
    finally:
        conn.close()
    if row is not None:
        return State(CommitTs(int(row[0]), int(row[1])), int(row[2]), int(row[3]), row[4])
    scanning = any(s == "scanning" for s in states)
    return State(job.start, 0, 0, 0 if scanning else None)


def _save_state(db: Path, job: J.Job, st: State) -> None:
    conn = open_sqlite(db / DB_FILE)
    try:
        conn.execute(_DDL)
        conn.execute(
            "INSERT INTO _total_order VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET"
            " wall = excluded.wall, logical = excluded.logical, seq = excluded.seq, txn = excluded.txn,"
            " scan_rows = excluded.scan_rows",
            (job.id, st.at.wall, st.at.logical, st.seq, st.txn, st.scan_rows),
        )
    finally:
        conn.close()


def _from_tail(store: TopicStore, topic: str, job: J.Job, st: State) -> State:
    """The topic's last data record, if it is ahead of ``st`` (a crash after an append)."""
    info = store.offsets(topic).get(0)
    if info is None or info[1] == 0:
        return st
    earliest, nxt = info
    start = max(earliest, nxt - 64)
    while True:
        tail = store.read_arrow(topic, 0, start, nxt).column("value").to_pylist()
        for raw in reversed(tail):
            v = orjson.loads(raw)
            if "seq" not in v:
                continue  # a resolved message
            if int(v["seq"]) <= st.seq:
                return st
            at = CommitTs.parse_crdb(v["hlc"])
            scan = int(v["txn"]) == 1 and at == job.start and st.scan_rows is not None
            if scan:
                return State(
                    at if v["txn_end"] else st.at, int(v["seq"]), 1, None if v["txn_end"] else int(v["seq"])
                )
            return State(at, int(v["seq"]), int(v["txn"]), None)
        if start <= earliest:
            return st
        nxt, start = start, max(earliest, start - 1024)


# ============================================================================ rounds
def deliver(db: Path, job: J.Job, *, max_rounds: int | None = None) -> int:
    """Deliver what ``job`` (running, ``ordering = 'total'``) has not delivered yet; returns the
    number of changes delivered. Stops once caught up (or after ``max_rounds`` rounds)."""
    from changefeed.topics.store import TopicStore

    rows = open_sqlite(db / DB_FILE, readonly=True)
    try:
        feeds_rows = [f for f in all_feeds(rows) if f.spec.id in job.feed_ids]
    finally:
        rows.close()
    order = {fid: i for i, fid in enumerate(job.feed_ids)}
    feeds_rows.sort(key=lambda f: order[f.spec.id])
    specs = [f.spec for f in feeds_rows]
    states = [f.state for f in feeds_rows]
    if not specs or all(s in ("paused", "canceled", "failed", "succeeded", J.FEED_DONE) for s in states):
        return 0
    topic = specs[0].topic
    sink = open_delivery(db, specs[0])
    st = _load_state(db, job, specs, states)
    if isinstance(sink, TopicStore):
        sink.ensure_topic(topic, 1, specs[0].retention_ns)
        st = _from_tail(sink, topic, job, st)
    delivered = 0
    if st.scan_rows is not None:
        delivered += _scan(db, job, specs, sink, topic, st)
        _mark_running(db, [f.id for f in specs])
    rounds = 0
    last_resolved = 0.0
    while max_rounds is None or rounds < max_rounds:
        rounds += 1
        n, frontier, complete = _round(db, job, specs, sink, topic, st)
        delivered += n
        opts = options_of(specs[0])
        if complete and opts.resolved and frontier is not None and frontier >= st.at:
            stamp = frontier if job.end is None or frontier < job.end else job.end
            interval = opts.resolved_interval_ns(core=False) / 1e9
            if time.monotonic() - last_resolved >= interval:
                payload = CrdbJsonEncoder().resolved(stamp, 0, specs[0])
                _append(sink, topic, f"{_writer(job)}-resolved", stamp.wall, [None], [payload], [stamp.wall])
                last_resolved = time.monotonic()
        if complete:
            break
    return delivered


def _mark_running(db: Path, feed_ids: list[int]) -> None:
    conn = open_sqlite(db / DB_FILE)
    try:
        conn.executemany(
            "UPDATE _feeds SET state = 'running' WHERE id = ? AND state = 'scanning'",
            [(f,) for f in feed_ids],
        )
    finally:
        conn.close()


def _targets(db: Path, specs: list[FeedSpec]) -> list[_Target]:
    return [_Target(f, load_table(db, f.table_id)) for f in specs]


def _round(
    db: Path, job: J.Job, specs: list[FeedSpec], sink: Any, topic: str, st: State
) -> tuple[int, CommitTs | None, bool]:
    """One round: the transactions committed after ``st.at`` (at most about ROUND_ROWS changes
    a table, whole transactions). Returns (changes delivered, frontier, caught up)."""

    targets = _targets(db, specs)
    end = job.end
    rc = open_sqlite(db / DB_FILE, readonly=True)
    try:
        rc.execute("BEGIN")
        batches: list[pa.RecordBatch] = []
        complete = True
        cut: tuple[int, int] | None = None
        for t in targets:
            pos = _position(rc, t.table, st.at)
            b = read_changes(rc, t.table, pos, 1 << 62, limit=ROUND_ROWS)
            if b.num_rows >= ROUND_ROWS:
                complete = False
                last = (
                    int(b.column("ts")[b.num_rows - 1].as_py()),
                    int(b.column("lg")[b.num_rows - 1].as_py()),
                )
                cut = last if cut is None or last < cut else cut
            batches.append(b)
        if cut is not None:  # whole transactions only: the cut one is read to its end
            batches = [_complete(rc, t.table, b, cut) for t, b in zip(targets, batches, strict=True)]
        wall, logical = rc.execute("SELECT wall, logical FROM _clock WHERE id = 0").fetchone()
        frontier = CommitTs(int(wall), int(logical))
    finally:
        rc.execute("COMMIT")
        rc.close()
    if end is not None:
        batches = [_before(b, end) for b in batches]
    n = _deliver_changes(db, job, targets, batches, sink, topic, st)
    return n, frontier if complete else None, complete


def _position(conn: Any, table: TableSchema, at: CommitTs) -> int:
    row = conn.execute(
        f"SELECT COALESCE(MAX(seq), 0) FROM x{table.id} WHERE ts < ? OR (ts = ? AND lg <= ?)",
        (at.wall, at.wall, at.logical),
    ).fetchone()
    return int(row[0])


def _keep(b: pa.RecordBatch, pred: Any) -> pa.RecordBatch:
    import pyarrow as pa

    ts, lg = b.column("ts").to_pylist(), b.column("lg").to_pylist()
    return b.filter(pa.array([pred((t, g)) for t, g in zip(ts, lg, strict=True)], pa.bool_()))


def _complete(conn: Any, table: TableSchema, b: pa.RecordBatch, cut: tuple[int, int]) -> pa.RecordBatch:
    """``b`` up to and including the transaction at ``cut``, that transaction read to its end."""
    import pyarrow as pa

    b = _keep(b, lambda x: x <= cut)
    if (
        not b.num_rows
        or (int(b.column("ts")[b.num_rows - 1].as_py()), int(b.column("lg")[b.num_rows - 1].as_py())) != cut
    ):
        return b
    pos = int(b.column("seq")[b.num_rows - 1].as_py())
    rest = read_changes(conn, table, pos, 1 << 62)
    more = _keep(rest, lambda x: x == cut)
    return pa.concat_batches([b, more]) if more.num_rows else b


def _before(b: pa.RecordBatch, end: CommitTs) -> pa.RecordBatch:
    return _keep(b, lambda x: x < (end.wall, end.logical))


def _deliver_changes(
    db: Path,
    job: J.Job,
    targets: list[_Target],
    batches: list[pa.RecordBatch],
    sink: Any,
    topic: str,
    st: State,
) -> int:
    import numpy as np
    import pyarrow as pa

    enc = CrdbJsonEncoder()
    parts: list[tuple[int, pa.RecordBatch, pa.Array, pa.Array]] = []
    for i, (t, b) in enumerate(zip(targets, batches, strict=True)):
        if b.num_rows:
            keys, values = enc.encode_arrow(b, t.table, t.feed)
            parts.append((i, b, keys, values))
    if not parts:
        return 0
    ts = np.concatenate([p[1].column("ts").to_numpy() for p in parts])
    lg = np.concatenate([p[1].column("lg").to_numpy() for p in parts])
    tab = np.concatenate([np.full(p[1].num_rows, p[0]) for p in parts])
    xs = np.concatenate([p[1].column("seq").to_numpy() for p in parts])
    order = np.lexsort((xs, tab, lg, ts))
    keys = pa.concat_arrays([p[2].cast(pa.binary()) for p in parts]).take(pa.array(order))
    values = pa.concat_arrays([p[3].cast(pa.binary()) for p in parts]).take(pa.array(order))
    ts, lg, tab = ts[order], lg[order], tab[order]
    names = [t.table.short_name for t in targets]
    records = wrap(keys, values, ts, lg, tab, names, st.seq, st.txn)
    n = len(order)
    _append(sink, topic, _writer(job), st.seq + n, keys, records, ts)
    new_txns = int(np.count_nonzero(np.diff(ts) | np.diff(lg))) + 1
    st.at = CommitTs(int(ts[-1]), int(lg[-1]))
    st.seq += n
    st.txn += new_txns
    _save_state(db, job, st)
    _progress(db, targets, batches, st.at)
    return n


def wrap(
    keys: pa.Array,
    values: pa.Array,
    ts: Any,
    lg: Any,
    tab: Any,
    names: list[str],
    seq0: int,
    txn0: int,
    *,
    txn_ends_last: bool = True,
    continues_at: int | None = None,
) -> pa.Array:
    """The records' values (see the module docstring), column-wise: ``keys``/``values`` the
    CockroachDB key and message of each change in delivery order, ``ts``/``lg`` their commit
    times (numpy), ``tab`` the index of each one's table in ``names``. ``continues_at``: the
    first change continues transaction ``txn0`` at that index (a scan delivered in batches)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(ts)
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = (np.diff(ts) != 0) | (np.diff(lg) != 0)
    if continues_at is not None and n:
        new[0] = False
    txn = txn0 + np.cumsum(new)
    starts = np.flatnonzero(new)
    if continues_at is not None:
        starts = np.concatenate([[0], starts])
    index = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    if continues_at is not None:
        first_end = starts[1] if len(starts) > 1 else n
        index[:first_end] += continues_at
    end = np.zeros(n, dtype=bool)
    end[:-1] = new[1:]
    end[-1] = txn_ends_last
    seq = np.arange(seq0 + 1, seq0 + n + 1)

    def as_text(a: Any) -> pa.Array:
        return pc.cast(pa.array(a), pa.string())

    hlc = pc.binary_join_element_wise(as_text(ts), ".", pc.utf8_lpad(as_text(lg), 10, "0"), "")
    msg = pc.if_else(pc.equal(pc.binary_length(values), 0), pa.scalar(b"null"), values)
    table_json = pa.array([orjson.dumps(x).decode() for x in names]).take(pa.array(tab))
    out = pc.binary_join_element_wise(
        '{"hlc": "', hlc,
        '", "key": ', keys.cast(pa.string()),
        ', "message": ', msg.cast(pa.string()),
        ', "seq": ', as_text(seq),
        ', "table": ', table_json,
        ', "txn": ', as_text(txn),
        ', "txn_end": ', pa.array(np.where(end, "true", "false")),
        ', "txn_index": ', as_text(index),
        "}", "",
    )  # fmt: skip
    return out.cast(pa.binary())


def _append(sink: Any, topic: str, writer: str, batch_id: int, keys: Any, values: Any, tss: Any) -> None:
    """One append of (key, value, ts) columns (Arrow arrays or lists) to partition 0."""
    import pyarrow as pa

    records = pa.table(
        {
            "key": keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()),
            "value": values if isinstance(values, pa.Array) else pa.array(values, pa.binary()),
            "ts": pa.array(tss, pa.int64()),
        }
    )
    sink.append(topic, 0, writer, batch_id, records)


def _progress(db: Path, targets: list[_Target], batches: list[pa.RecordBatch], at: CommitTs) -> None:
    """Each feed's ``_progress``: its table's change-stream position up to ``at`` (the job's high
    water and what GC may remove follow it)."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        marks = [(t.feed.id, _position(conn, t.table, at)) for t in targets]
    finally:
        conn.close()
    for fid, pos in marks:
        write_progress(db, fid, pos, at.wall, at.logical)


# ============================================================================ the initial scan
def _scan(db: Path, job: J.Job, specs: list[FeedSpec], sink: Any, topic: str, st: State) -> int:
    """Transaction 1: every table's rows as of the job's start, in key order, in batches; resumes
    after the ``st.scan_rows`` rows already delivered."""
    import numpy as np
    import pyarrow as pa

    targets = _targets(db, specs)
    enc = CrdbJsonEncoder()
    names = [t.table.short_name for t in targets]
    skip = st.scan_rows or 0
    delivered = 0
    pending: list[tuple[int, pa.Array, pa.Array]] = []

    def chunks() -> Iterator[tuple[int, pa.RecordBatch]]:
        for i, t in enumerate(targets):
            snap = _snapshot(db, t)
            for off in range(0, snap.num_rows, SCAN_BATCH):
                yield i, snap.slice(off, SCAN_BATCH)

    def flush(last: bool) -> None:
        nonlocal delivered
        if not pending:
            return
        keys = pa.concat_arrays([k for _, k, _ in pending])
        values = pa.concat_arrays([v for _, _, v in pending])
        tab = np.concatenate([np.full(len(k), i) for i, k, _ in pending])
        n = len(keys)
        ts = np.full(n, job.start.wall, dtype=np.int64)
        lg = np.full(n, job.start.logical, dtype=np.int64)
        # the scan is transaction 1: its first batch starts it, the others (and a resumed scan)
        # continue it
        first = st.seq == 0
        records = wrap(
            keys, values, ts, lg, tab, names, st.seq, 0 if first else 1,
            txn_ends_last=last, continues_at=None if first else st.seq,
        )  # fmt: skip
        _append(sink, topic, _writer(job), st.seq + n, keys, records, ts)
        st.seq += n
        st.txn = 1
        st.scan_rows = None if last else st.seq
        _save_state(db, job, st)
        delivered += n
        pending.clear()

    it = chunks()
    current = next(it, None)
    rows_in_pending = 0
    position = 0
    while current is not None:
        i, batch = current
        nxt = next(it, None)
        if position + batch.num_rows <= skip:
            position += batch.num_rows
            current = nxt
            continue
        if position < skip:
            batch = batch.slice(skip - position)
            position = skip
        position += batch.num_rows
        keys, values = enc.encode_arrow(batch, targets[i].table, targets[i].feed)
        pending.append((i, keys.cast(pa.binary()), values.cast(pa.binary())))
        rows_in_pending += batch.num_rows
        if nxt is None or rows_in_pending >= SCAN_BATCH:
            flush(nxt is None)
            rows_in_pending = 0
        current = nxt
    if st.scan_rows is not None and not pending and position <= skip:
        # nothing (more) to deliver: an empty snapshot, or the last batch was the final one
        st.scan_rows = None
        _save_state(db, job, st)
    for t in targets:
        write_progress(db, t.feed.id, t.feed.created_seq, job.start.wall, job.start.logical)
    return delivered


def _snapshot(db: Path, t: _Target) -> pa.RecordBatch:
    """The table's rows at the job's start, sorted by key (the scan's order must not depend on
    when it is read: a resumed scan skips the rows already delivered by count)."""
    import pyarrow as pa

    from changefeed.pipeline.snapshot.chunks import read_chunk_batches

    batches = list(read_chunk_batches(str(db), t.table, t.feed, [], 0))
    if not batches:
        from changefeed.engine.changes import change_schema

        return pa.RecordBatch.from_pylist([], schema=change_schema(t.table))
    table = pa.Table.from_batches(batches)
    table = table.sort_by([(c.db, "ascending") for c in t.table.key])
    return table.combine_chunks().to_batches()[0] if table.num_rows else batches[0].slice(0, 0)


# ============================================================================ the runner's side
def total_jobs(db: Path) -> list[J.Job]:
    """The running ``ordering = 'total'`` jobs."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return [j for j in J.all_jobs(conn) if j.status == J.RUNNING and is_total(j)]
    finally:
        conn.close()


def total_feed_ids(db: Path) -> set[int]:
    """Feeds of ``ordering = 'total'`` jobs (any status): the Spark queries leave them alone."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return {fid for j in J.all_jobs(conn) if is_total(j) for fid in j.feed_ids}
    finally:
        conn.close()


def deliver_all(db: Path) -> int:
    """One pass over every running total-order job (until each is caught up)."""
    n = 0
    for job in total_jobs(db):
        n += deliver(db, job)
    return n


__all__ = ["deliver", "deliver_all", "is_total", "total_feed_ids", "total_jobs", "wrap"]
