"""What every changefeed is doing now: state, high water, lag, and whether a pipeline holds it.

One read serves ``changefeed feeds``, ``SHOW CHANGEFEED JOB(S)``'s ``running_status``, a node's
``/metrics`` gauges and its console, so they all show the same figures:

* one row per YDB changefeed and one per CockroachDB job (a job's feeds, one per watched table,
  are its row: high water the minimum of theirs, pending when any of them is);
* **lag** is now minus the high water whenever changes are pending (committed after what was
  delivered), so it grows with the clock while nothing delivers them, and 0 when caught up;
* **held**: a pipeline (a node or ``changefeed run``, :mod:`changefeed.feeds.runners`) is at
  work on the database and the feed is active; ``running_status`` says, as CockroachDB's column
  does, what it is doing: ``running: resolved=<hlc>``, ``performing initial scan``,
  ``retryable error: ...``, or that no pipeline is delivering it.

The cost is a handful of indexed lookups per feed (well under a millisecond each): the newest
journal position of each watched table and the transaction at the delivered position.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from changefeed.engine.clock import CommitTs
from changefeed.feeds import jobs as J, replication as R
from changefeed.feeds.runners import runner_live
from changefeed.feeds.store import all_feeds

__all__ = [
    "ACTIVE_STATES",
    "WAITING",
    "FeedStatus",
    "clear_running_status",
    "feed_label",
    "job_label",
    "job_running_statuses",
    "set_running_status",
    "statuses",
]

#: Feed states a pipeline delivers.
ACTIVE_STATES = ("running", "scanning")
#: ``running_status`` of an active feed or job that no pipeline holds.
WAITING = "waiting for a pipeline: no node (changefeed start) or changefeed run is delivering it"

_STATUS_DDL = (
    "CREATE TABLE IF NOT EXISTS _feed_status (feed_id INTEGER PRIMARY KEY, running_status TEXT,"
    " error TEXT, modified INTEGER NOT NULL)"
)


def feed_label(topic: str) -> str:
    """The metrics label of a YDB changefeed: its topic (``table/feed``)."""
    return topic


def job_label(job_id: int) -> str:
    """The metrics label of a CockroachDB job: its id."""
    return str(job_id)


@dataclass(frozen=True, slots=True)
class FeedStatus:
    id: int
    label: str
    table: str
    name: str
    kind: str  # "ydb" | "crdb job" | "crdb" (a job's feed whose job is gone)
    format: str
    mode: str
    topic: str
    partitions: int | str
    state: str
    high_water: CommitTs
    high_water_ydb: str
    delivered_seq: int
    pending_changes: bool
    lag_ns: int
    held: bool
    running_status: str | None
    error: str | None
    scan: dict[str, Any] | None
    updated_ns: int | None
    feed_ids: tuple[int, ...] = field(default=())
    #: what only some kinds have (an asynchronous replication: endpoint, rows applied...)
    detail: dict[str, Any] | None = None

    @property
    def lag_s(self) -> float:
        return self.lag_ns / 1e9

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["high_water"] = {"wall": self.high_water.wall, "logical": self.high_water.logical}
        d["high_water_crdb"] = self.high_water.crdb()
        d["lag_s"] = round(self.lag_s, 3)
        d["feed_ids"] = list(self.feed_ids)
        d.update(d.pop("detail") or {})
        return d


def _ensure_status_table(conn: sqlite3.Connection) -> None:
    conn.execute(_STATUS_DDL)


def set_running_status(
    conn: sqlite3.Connection, feed_id: int, running_status: str | None, error: str | None, now: int
) -> None:
    """Record what the pipeline is doing with a feed (a retry's error, say); inside a write txn."""
    _ensure_status_table(conn)
    conn.execute(
        "INSERT INTO _feed_status (feed_id, running_status, error, modified) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (feed_id) DO UPDATE SET running_status = excluded.running_status,"
        " error = excluded.error, modified = excluded.modified",
        (feed_id, running_status, error, now),
    )


def clear_running_status(conn: sqlite3.Connection, feed_ids: Iterable[int]) -> None:
    if not _has(conn, "_feed_status"):
        return
    for fid in feed_ids:
        conn.execute("DELETE FROM _feed_status WHERE feed_id = ?", (fid,))


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        is not None
    )


@dataclass(slots=True)
class _Feed:
    """One feed's own figures, before rows are made (a job's feeds are folded into its row)."""

    seq: int
    hw: CommitTs
    tx: int | None
    pending: bool
    detail: dict[str, Any] | None
    updated: int | None


class _Reader:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.newest: dict[int, int] = {}

    def newest_seq(self, table_id: int) -> int:
        got = self.newest.get(table_id)
        if got is None:
            try:
                row = self.conn.execute(f"SELECT MAX(seq) FROM x{int(table_id)}").fetchone()
                got = int(row[0]) if row and row[0] is not None else 0
            except sqlite3.OperationalError:  # no change stream (the table is gone)
                got = 0
            self.newest[table_id] = got
        return got

    def tx_at(self, table_id: int, seq: int) -> int | None:
        try:
            row = self.conn.execute(
                f"SELECT tx FROM x{int(table_id)} WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
            ).fetchone()
        except sqlite3.OperationalError:
            return None
        return None if row is None else int(row[0])


def _ydb_ts(wall: int, tx: int | None) -> str:
    return f"[{wall // 1_000_000}, {tx if tx is not None else 0}]"


def statuses(conn: sqlite3.Connection, db: Path, now_ns: int) -> list[FeedStatus]:
    """Every YDB changefeed and CockroachDB job of the database at ``db`` (``conn`` on its file)."""
    reader = _Reader(conn)
    progress = {
        int(r[0]): r[1:]
        for r in conn.execute("SELECT feed_id, seq, wall, logical, updated_ns, detail FROM _progress")
    }
    notes: dict[int, tuple[str | None, str | None]] = {}
    if _has(conn, "_feed_status"):
        notes = {
            int(r[0]): (r[1], r[2])
            for r in conn.execute("SELECT feed_id, running_status, error FROM _feed_status")
        }
    live = runner_live(db)
    jobs = J.all_jobs(conn)
    job_of = {fid: j for j in jobs for fid in j.feed_ids}
    own: dict[int, _Feed] = {}
    out: list[FeedStatus] = []
    rows = all_feeds(conn)
    for fr in rows:
        f = fr.spec
        seq, wall, logical, updated, detail = progress.get(
            f.id, (f.created_seq, f.created_wall, f.created_logical, None, None)
        )
        hw = CommitTs(int(wall), int(logical))
        pending = reader.newest_seq(f.table_id) > int(seq)
        scan = json.loads(detail) if detail else None
        own[f.id] = _Feed(int(seq), hw, None, pending, scan, updated)
        if f.id in job_of:
            continue
        tx = reader.tx_at(f.table_id, int(seq))
        held = live and fr.state in ACTIVE_STATES
        note, error = notes.get(f.id, (None, None))
        out.append(
            FeedStatus(
                id=f.id,
                label=feed_label(f.topic),
                table=fr.table,
                name=f.name,
                kind=f.kind,
                format=f.format,
                mode=f.mode.value,
                topic=f.topic,
                partitions=f.partitions,
                state=fr.state,
                high_water=hw,
                high_water_ydb=_ydb_ts(hw.wall, tx if tx is not None else f.created_tx),
                delivered_seq=int(seq),
                pending_changes=pending,
                lag_ns=max(0, now_ns - hw.wall) if pending else 0,
                held=held,
                running_status=_feed_running_status(fr.state, held, note, hw, scan),
                error=error,
                scan=scan if fr.state == "scanning" or scan else None,
                updated_ns=updated,
            )
        )
    for j in jobs:
        out.append(_job_status(j, own, notes, live, now_ns))
    out.extend(replication_statuses(conn, live, now_ns))
    return out


def replication_statuses(conn: sqlite3.Connection, live: bool, now_ns: int) -> list[FeedStatus]:
    """One row per asynchronous replication of this (destination) database (issue 20): its state,
    how far it applied (GLOBAL: the barrier the replicas are consistent as of) and its lag."""
    out = []
    for st in R.status(conn, now_ns):
        rep = st.replication
        wall = rep.applied_wall
        out.append(
            FeedStatus(
                id=rep.id,
                label=f"replication_{rep.name}",
                table=",".join(f"{it.source_path}->{it.target_name}" for it in rep.items),
                name=rep.name,
                kind="async replication",
                format=rep.spec.consistency.shown,
                mode="",
                topic=",".join(it.topic for it in rep.items),
                partitions=sum(it.partitions for it in rep.items),
                state=rep.state,
                high_water=CommitTs(wall, 0),
                high_water_ydb=_ydb_ts(wall, 0) if wall else "",
                delivered_seq=0,
                pending_changes=bool(st.buffered),
                lag_ns=st.lag_ns or 0,
                held=live,
                running_status=None,
                error=rep.error,
                scan=None,
                updated_ns=rep.applied_ns or rep.modified_ns,
                detail={
                    "endpoint": rep.spec.endpoint.shown,
                    "applied_rows": rep.applied_rows,
                    "buffered_changes": st.buffered,
                    "initial_scan_progress": list(st.scan_progress),
                },
            )
        )
    return out


def _feed_running_status(
    state: str, held: bool, note: str | None, hw: CommitTs, scan: dict[str, Any] | None
) -> str | None:
    if state not in ACTIVE_STATES:
        return None
    if not held:
        return WAITING
    if note:
        return note
    if state == "scanning":
        return "performing initial scan" + (
            f": {scan.get('scanned', 0)}/{scan['total']} ranges" if scan and "total" in scan else ""
        )
    return f"running: resolved={J.hlc_string(hw)}"


def _job_status(
    j: J.Job,
    own: dict[int, _Feed],
    notes: dict[int, tuple[str | None, str | None]],
    live: bool,
    now_ns: int,
) -> FeedStatus:
    feeds = [own[fid] for fid in j.feed_ids if fid in own]
    marks = [max(f.hw, j.start) for f in feeds]
    hw = min(marks) if marks else (j.high_water or j.start)
    if j.high_water is not None and j.status in J.TERMINAL:
        hw = j.high_water
    pending = j.status not in J.TERMINAL and any(f.pending for f in feeds)
    held = live and j.status in (J.RUNNING, J.PAUSE_REQUESTED)
    retry = next((notes[fid] for fid in j.feed_ids if fid in notes and notes[fid][0]), None)
    if j.status == J.RUNNING and not held:
        running_status: str | None = WAITING
    elif j.status == J.RUNNING and retry is not None:
        running_status = retry[0]
    elif j.status == J.RUNNING and any(
        f.detail and "total" in f.detail and f.detail.get("scanned") != f.detail["total"] for f in feeds
    ):
        running_status = "performing initial scan"
    elif j.status == J.RUNNING:
        running_status = f"running: resolved={J.hlc_string(hw)}"
    else:
        running_status = j.running_status
    updated = max((f.updated or 0 for f in feeds), default=0) or j.modified
    scans = [f.detail for f in feeds if f.detail and "total" in f.detail]
    scan = (
        {
            "scanned": sum(int(d.get("scanned", 0)) for d in scans),
            "total": sum(int(d["total"]) for d in scans),
        }
        if scans
        else None
    )
    return FeedStatus(
        id=j.id,
        label=job_label(j.id),
        table=",".join(t.name for t in j.targets),
        name=f"job {j.id}",
        kind="crdb job",
        format=j.format,
        mode="",
        topic=",".join(j.topics),
        partitions="",
        state=j.status,
        high_water=hw,
        high_water_ydb="",
        delivered_seq=min((f.seq for f in feeds), default=0),
        pending_changes=pending,
        lag_ns=max(0, now_ns - hw.wall) if pending else 0,
        held=held,
        running_status=running_status,
        error=j.error or (retry[1] if retry is not None else None),
        scan=scan,
        updated_ns=updated,
        feed_ids=tuple(j.feed_ids),
    )


def job_running_statuses(conn: sqlite3.Connection, db: Path, now_ns: int) -> dict[int, str | None]:
    """job id -> what ``SHOW CHANGEFEED JOB(S)`` shows as its ``running_status`` now."""
    return {s.id: s.running_status for s in statuses(conn, db, now_ns) if s.kind == "crdb job"}
