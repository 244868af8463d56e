"""What ``changefeed run`` does for CockroachDB changefeed jobs besides running their feeds.

Feeds of a job run like every other feed (one streaming query each, see ``stream/query.py``); this module
supplies the job-level parts:

* :func:`job_of_feeds` tells the runner which job a feed belongs to: its ``end_time`` caps the
  journal source, an ``initial_scan='only'`` feed gets no streaming query;
* :func:`advance` runs every few seconds (and after ``--until-idle``): it records each running
  job's high-water timestamp (the minimum over its feeds of what they durably delivered) and
  ``running_status``, marks feeds that reached ``end_time`` or finished their scan-only export
  ``done``, and a job whose feeds are all done ``succeeded``;
* :func:`record_failure` turns a feed's failure into its job's (``failed``, or ``paused`` with
  ``on_error='pause'``) instead of stopping every other feed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, Database, open_sqlite
from changefeed.feeds import jobs as J

log = logging.getLogger(__name__)


def job_of_feeds(db: Path) -> dict[int, J.Job]:
    """feed id -> its job, for every job."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return {fid: job for job in J.all_jobs(conn) for fid in job.feed_ids}
    finally:
        conn.close()


def streams(job: J.Job | None) -> bool:
    """Whether a feed of ``job`` (None: not a job's feed) runs a streaming query after its scan."""
    return job is None or not job.scan_only


def _cap_seq(conn: sqlite3.Connection, table_id: int, end: CommitTs) -> int:
    row = conn.execute(
        f"SELECT COALESCE(MAX(seq), 0) FROM x{table_id} WHERE ts < ? OR (ts = ? AND lg <= ?)",
        (end.wall, end.wall, end.logical),
    ).fetchone()
    return int(row[0])


def advance(db: Path, running_feeds: Collection[int] = ()) -> None:
    """Record progress of every running job and finish the jobs that are done; mark ``paused``
    the ``pause-requested`` jobs none of whose feeds is among this runner's ``running_feeds``."""
    database = Database(db, create=False)
    try:
        conn = database.conn
        jobs = J.all_jobs(conn)
        stopped = [
            j
            for j in jobs
            if j.status == J.PAUSE_REQUESTED and not any(f in running_feeds for f in j.feed_ids)
        ]
        if stopped:
            with database.lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for j in stopped:
                        current = J.get_job(conn, j.id)
                        if current is not None:
                            J.paused(conn, current, database.clock.now_ns())
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        running = [j for j in jobs if j.status == J.RUNNING]
        if not running:
            return
        # end_time: once the commit clock has passed it, everything at or before it is visible.
        ends = [j.end for j in running if j.end is not None]
        if ends and database.last_ts() <= max(ends) and database.clock.now_ns() > min(e.wall for e in ends):
            database.close_timestamp()
        last = database.last_ts()
        now = database.clock.now_ns()
        with database.lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for job in running:
                    _advance_job(conn, job, last, now)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
    finally:
        database.close()


def _advance_job(conn: sqlite3.Connection, job: J.Job, last: CommitTs, now: int) -> None:
    current = J.get_job(conn, job.id)
    if current is None or current.status != J.RUNNING:
        return  # changed meanwhile (paused, canceled)
    job = current
    marks: list[CommitTs] = []
    all_done = True
    for fid in job.feed_ids:
        row = conn.execute(
            "SELECT f.state, f.table_id, COALESCE(p.seq, f.created_seq), p.wall, p.logical FROM _feeds f"
            " LEFT JOIN _progress p ON p.feed_id = f.id WHERE f.id = ?",
            (fid,),
        ).fetchone()
        if row is None:
            continue
        state, table_id, seq, wall, logical = row
        hw = job.start if wall is None else max(CommitTs(int(wall), int(logical)), job.start)
        scan_done = job.scan_only and J.scan_complete(conn, fid)
        end_reached = (
            job.end is not None and last > job.end and int(seq) >= _cap_seq(conn, int(table_id), job.end)
        )
        if state == "running" and (scan_done or end_reached):
            state = J.FEED_DONE
        if state == J.FEED_DONE:
            conn.execute("UPDATE _feeds SET state = ? WHERE id = ?", (J.FEED_DONE, fid))
            hw = job.end if job.end is not None else hw
        else:
            all_done = False
        marks.append(hw)
    high = min(marks) if marks else job.high_water
    if all_done and marks:
        J.succeed(conn, replace(job, high_water=job.end or high), now)
        return
    if high != job.high_water:
        status = None if high is None else f"running: resolved={J.hlc_string(high)}"
        J.save_job(conn, replace(job, high_water=high, running_status=status, modified=now))


def record_failure(db: Path, feed_id: int, message: str) -> bool:
    """Fail (or pause, with on_error='pause') the job of ``feed_id``; False if it has none."""
    database = Database(db, create=False)
    try:
        conn = database.conn
        with database.lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                job = next((j for j in J.all_jobs(conn) if feed_id in j.feed_ids), None)
                if job is not None:
                    J.fail(conn, job, database.clock.now_ns(), message)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        if job is not None:
            log.error("changefeed job %d: %s", job.id, message)
        return job is not None
    finally:
        database.close()
