"""CockroachDB changefeed jobs: the ``_jobs`` table, job ids, statuses and their transitions.

A job (``CREATE CHANGEFEED .. INTO``) owns one feed (a :class:`~changefeed.feeds.spec.FeedSpec`
row in ``_feeds``, kind ``crdb``) per target table; the pipeline runs feeds, the job is what
users see and control. The job's status drives its feeds' states (the runner starts and stops
feed queries by state, within a few seconds):

====================  ==========================================================
job status            its feeds
====================  ==========================================================
``running``           ``scanning`` (initial scan first) or ``running``; ``done`` once a
                      feed reached ``end_time`` or finished its ``initial_scan='only'``
``pause-requested``   ``paused``: the runner stops them between micro-batches, then marks
                      the job ``paused`` (at once when no runner is at work)
``paused``            ``paused``: not delivering, journal still protected from GC
``canceled``          ``canceled``: stopped, protection released, topics kept
``failed``            ``failed`` (on_error='fail'); with on_error='pause' the job pauses
``succeeded``         ``succeeded``: every feed reached end_time / finished its scan
====================  ==========================================================

Statuses, transitions and their errors are CockroachDB's (``pkg/jobs``): PAUSE of a paused job
and RESUME of a running one do nothing; anything else out of order is refused.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from changefeed.engine.clock import CommitTs
from changefeed.engine.type_errors import sql_text
from changefeed.exceptions import GcThresholdError, InvalidOption, JobNotFound, JobStateError
from changefeed.feeds.store import bump_feeds_version

# --------------------------------------------------------------------------- statuses
RUNNING = "running"
PAUSE_REQUESTED = "pause-requested"
PAUSED = "paused"
CANCELED = "canceled"
FAILED = "failed"
SUCCEEDED = "succeeded"
TERMINAL = (CANCELED, FAILED, SUCCEEDED)

#: Feed states (``_feeds.state``) of job feeds besides the pipeline's ``scanning``/``running``.
FEED_PAUSED = "paused"
FEED_DONE = "done"
#: Feed states whose journal rows are protected from GC (everything not finished for good).
PROTECTING_STATES = ("scanning", "running", FEED_PAUSED, FEED_DONE)

JOB_TYPE = "CHANGEFEED"

_DDL = (
    "CREATE TABLE IF NOT EXISTS _jobs (id INTEGER PRIMARY KEY, job_type TEXT NOT NULL,"
    " description TEXT NOT NULL, user_name TEXT NOT NULL, status TEXT NOT NULL, running_status TEXT,"
    " created INTEGER NOT NULL, started INTEGER, finished INTEGER, modified INTEGER NOT NULL,"
    " hw_wall INTEGER, hw_logical INTEGER, error TEXT, sink_uri TEXT NOT NULL,"
    " full_table_names TEXT NOT NULL, topics TEXT NOT NULL, format TEXT NOT NULL, options TEXT NOT NULL,"
    " targets TEXT NOT NULL, feed_ids TEXT NOT NULL, start_wall INTEGER NOT NULL, start_logical INTEGER NOT NULL,"
    " end_wall INTEGER, end_logical INTEGER, scan_only INTEGER NOT NULL DEFAULT 0,"
    " on_error TEXT NOT NULL DEFAULT 'fail')"
)


@dataclass(frozen=True, slots=True)
class Target:
    """One watched table: catalog id, name as shown, family (``None``: the whole table)."""

    table_id: int
    name: str
    family: str | None = None

    def to_json(self) -> list[Any]:
        return [self.table_id, self.name, self.family]

    @staticmethod
    def from_json(v: Sequence[Any]) -> Target:
        return Target(int(v[0]), str(v[1]), v[2])


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    description: str
    user_name: str
    status: str
    running_status: str | None
    created: int  # ns since the epoch
    started: int | None
    finished: int | None
    modified: int
    high_water: CommitTs | None
    error: str | None
    sink_uri: str  # redacted
    full_table_names: tuple[str, ...]
    topics: tuple[str, ...]
    format: str
    options: dict[str, str | None]  # as given (values rendered as text), no sink
    targets: tuple[Target, ...]
    feed_ids: tuple[int, ...]
    start: CommitTs  # statement time, or cursor
    end: CommitTs | None = None
    scan_only: bool = False
    on_error: str = "fail"
    sink: str = field(default="", compare=False)  # unredacted URI (kept in options["__sink"])


def gc_threshold_error(cursor: CommitTs, threshold: CommitTs) -> GcThresholdError:
    """CockroachDB's refusal of a ``cursor`` older than a watched table's GC threshold."""
    return GcThresholdError(
        f"could not create changefeed: cursor {cursor.crdb()} is older than the GC threshold "
        f"{threshold.crdb()}: batch timestamp {hlc_string(cursor)} must be after replica GC "
        f"threshold {hlc_string(threshold)} (hint: use a more recent cursor)"
    )


def ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(_DDL)


def has_table(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_jobs'").fetchone()
        is not None
    )


_COLS = (
    "id, description, user_name, status, running_status, created, started, finished, modified, hw_wall,"
    " hw_logical, error, sink_uri, full_table_names, topics, format, options, targets, feed_ids,"
    " start_wall, start_logical, end_wall, end_logical, scan_only, on_error"
)


def _job(r: Sequence[Any]) -> Job:
    options = orjson.loads(r[16])
    sink = options.pop("__sink", r[12])
    return Job(
        id=int(r[0]),
        description=r[1],
        user_name=r[2],
        status=r[3],
        running_status=r[4],
        created=int(r[5]),
        started=r[6],
        finished=r[7],
        modified=int(r[8]),
        high_water=None if r[9] is None else CommitTs(int(r[9]), int(r[10])),
        error=r[11],
        sink_uri=r[12],
        full_table_names=tuple(orjson.loads(r[13])),
        topics=tuple(orjson.loads(r[14])),
        format=r[15],
        options=options,
        targets=tuple(Target.from_json(t) for t in orjson.loads(r[17])),
        feed_ids=tuple(orjson.loads(r[18])),
        start=CommitTs(int(r[19]), int(r[20])),
        end=None if r[21] is None else CommitTs(int(r[21]), int(r[22])),
        scan_only=bool(r[23]),
        on_error=r[24],
        sink=sink,
    )


def all_jobs(conn: sqlite3.Connection) -> list[Job]:
    if not has_table(conn):
        return []
    return [_job(r) for r in conn.execute(f"SELECT {_COLS} FROM _jobs ORDER BY id")]


def get_job(conn: sqlite3.Connection, job_id: int) -> Job | None:
    if not has_table(conn):
        return None
    r = conn.execute(f"SELECT {_COLS} FROM _jobs WHERE id = ?", (job_id,)).fetchone()
    return None if r is None else _job(r)


def load_job(conn: sqlite3.Connection, job_id: int) -> Job:
    job = get_job(conn, job_id)
    if job is None:
        raise JobNotFound(f"job with ID {job_id} does not exist")
    return job


def insert_job(conn: sqlite3.Connection, job: Job) -> None:
    ensure_table(conn)
    bump_feeds_version(conn)
    conn.execute(
        f"INSERT INTO _jobs (job_type, {_COLS}) VALUES (?, {', '.join('?' * 25)})",
        (JOB_TYPE, *_row(job)),
    )


def save_job(conn: sqlite3.Connection, job: Job) -> None:
    conn.execute(
        "UPDATE _jobs SET " + ", ".join(f"{c.strip()} = ?" for c in _COLS.split(",")[1:]) + " WHERE id = ?",
        (*_row(job)[1:], job.id),
    )


def _row(job: Job) -> tuple[Any, ...]:
    return (
        job.id,
        job.description,
        job.user_name,
        job.status,
        job.running_status,
        job.created,
        job.started,
        job.finished,
        job.modified,
        None if job.high_water is None else job.high_water.wall,
        None if job.high_water is None else job.high_water.logical,
        job.error,
        job.sink_uri,
        orjson.dumps(list(job.full_table_names)).decode(),
        orjson.dumps(list(job.topics)).decode(),
        job.format,
        orjson.dumps({**job.options, "__sink": job.sink}).decode(),
        orjson.dumps([t.to_json() for t in job.targets]).decode(),
        orjson.dumps(list(job.feed_ids)).decode(),
        job.start.wall,
        job.start.logical,
        None if job.end is None else job.end.wall,
        None if job.end is None else job.end.logical,
        int(job.scan_only),
        job.on_error,
    )


def new_job_id(conn: sqlite3.Connection, ts: CommitTs) -> int:
    """A CockroachDB-style id (``unique_rowid()``: 10 µs ticks << 15 | node), strictly increasing."""
    candidate = ((ts.wall // 10_000) << 15) | 1
    ensure_table(conn)
    top = conn.execute("SELECT MAX(id) FROM _jobs").fetchone()[0]
    return max(candidate, int(top or 0) + 1)


def parse_job_id(value: Any, *, what: str = "job ID") -> int:
    if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
        raise InvalidOption(f"{what} must be an INT value: {sql_text(value)}")
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        raise InvalidOption(f'{what} must be an INT value: could not parse "{value}" as type int') from None
    if d != d.to_integral_value():
        raise InvalidOption(f"{what} must be an INT value: {value}")
    return int(d)


# --------------------------------------------------------------------------- transitions
def set_feed_states(conn: sqlite3.Connection, job: Job, state: str, *, only: Sequence[str] = ()) -> None:
    bump_feeds_version(conn)
    for fid in job.feed_ids:
        if only:
            conn.execute(
                f"UPDATE _feeds SET state = ? WHERE id = ? AND state IN ({', '.join('?' * len(only))})",
                (state, fid, *only),
            )
        else:
            conn.execute("UPDATE _feeds SET state = ? WHERE id = ?", (state, fid))


def scan_complete(conn: sqlite3.Connection, feed_id: int) -> bool:
    row = conn.execute("SELECT detail FROM _progress WHERE feed_id = ?", (feed_id,)).fetchone()
    if row is None or not row[0]:
        return False
    try:
        d = orjson.loads(row[0])
        return bool(d.get("scanned") == d.get("total") and "total" in d)
    except (orjson.JSONDecodeError, AttributeError):
        return False


def _feed_row(conn: sqlite3.Connection, feed_id: int) -> tuple[str, dict[str, Any]] | None:
    r = conn.execute("SELECT state, spec FROM _feeds WHERE id = ?", (feed_id,)).fetchone()
    return None if r is None else (str(r[0]), orjson.loads(r[1]))


def pause(
    conn: sqlite3.Connection, job: Job, now: int, *, requested: bool = False, error: str | None = None
) -> Job:
    """Stop a running job's feeds; ``requested``: a runner is at work and confirms with :func:`paused`."""
    if job.status in (PAUSED, PAUSE_REQUESTED):
        return job
    if job.status != RUNNING:
        raise JobStateError(f"job with status {job.status} cannot be requested to be paused")
    set_feed_states(conn, job, FEED_PAUSED, only=("scanning", "running"))
    status = PAUSE_REQUESTED if requested else PAUSED
    return _update(conn, job, now, status=status, running_status=None, error=error)


def paused(conn: sqlite3.Connection, job: Job, now: int) -> Job:
    """The runner has stopped every feed of a ``pause-requested`` job."""
    if job.status != PAUSE_REQUESTED:
        return job
    return _update(conn, job, now, status=PAUSED)


def resume(conn: sqlite3.Connection, job: Job, now: int) -> Job:
    if job.status == RUNNING:
        return job
    if job.status != PAUSED:
        raise JobStateError(f"job with status {job.status} cannot be resumed")
    for fid in job.feed_ids:
        row = _feed_row(conn, fid)
        if row is None or row[0] != FEED_PAUSED:
            continue
        scanning = bool(row[1].get("initial_scan")) and not scan_complete(conn, fid)
        conn.execute("UPDATE _feeds SET state = ? WHERE id = ?", ("scanning" if scanning else "running", fid))
    return _update(conn, job, now, status=RUNNING, error=None)


def cancel(conn: sqlite3.Connection, job: Job, now: int) -> Job:
    if job.status == CANCELED:
        return job
    if job.status not in (RUNNING, PAUSE_REQUESTED, PAUSED):
        raise JobStateError(f"job with status {job.status} cannot be requested to be canceled")
    set_feed_states(conn, job, CANCELED)
    return _update(conn, job, now, status=CANCELED, running_status=None, finished=now)


def fail(conn: sqlite3.Connection, job: Job, now: int, error: str) -> Job:
    """A non-retryable error: the job fails, or pauses with ``on_error='pause'``."""
    if job.status in TERMINAL:
        return job
    if job.on_error == "pause":
        stopped = job if job.status in (PAUSED, PAUSE_REQUESTED) else pause(conn, job, now)
        msg = f"job failed ({error}) but is being paused because of on_error=pause"
        return _update(conn, stopped, now, error=msg, running_status=msg)
    set_feed_states(conn, job, FAILED)
    return _update(conn, job, now, status=FAILED, error=error, finished=now, running_status=None)


def succeed(conn: sqlite3.Connection, job: Job, now: int) -> Job:
    set_feed_states(conn, job, SUCCEEDED)
    return _update(conn, job, now, status=SUCCEEDED, finished=now, running_status=None)


def on_table_dropped(conn: sqlite3.Connection, table_id: int, table: str, now: int) -> None:
    """A watched table was dropped: its jobs fail (CockroachDB: ``"t" was dropped``)."""
    from dataclasses import replace

    for job in all_jobs(conn):
        if job.status in TERMINAL or all(t.table_id != table_id for t in job.targets):
            continue
        fail(conn, replace(job, on_error="fail"), now, f'"{table}" was dropped')


_UNSET: Any = object()


def _update(
    conn: sqlite3.Connection,
    job: Job,
    now: int,
    *,
    status: str = _UNSET,
    running_status: str | None = _UNSET,
    error: str | None = _UNSET,
    finished: int | None = _UNSET,
) -> Job:
    from dataclasses import replace

    kw: dict[str, Any] = {"modified": now}
    if status is not _UNSET:
        kw["status"] = status
        if status != job.status:
            bump_feeds_version(conn)
    if running_status is not _UNSET:
        kw["running_status"] = running_status
    if error is not _UNSET:
        kw["error"] = error
    if finished is not _UNSET:
        kw["finished"] = finished
    new = replace(job, **kw)
    save_job(conn, new)
    return new


# --------------------------------------------------------------------------- time forms
_NANOS = re.compile(r"^-?\d+$")
_HLC = re.compile(r"^\d+\.\d{1,10}$")


def parse_crdb_time(value: str, statement_time: CommitTs, *, option: str) -> CommitTs:
    """``cursor``/``end_time`` forms: HLC decimal, nanoseconds, a timestamp, or a negative interval
    relative to the statement time (``'-3 days'``)."""
    s = value.strip()
    if _HLC.match(s):
        wall, logical = s.split(".", 1)
        return CommitTs(int(wall), int(logical.ljust(10, "0")))
    if _NANOS.match(s):
        return CommitTs(int(s), 0)
    if s.startswith("-"):
        from changefeed.engine.temporal_text import parse_interval

        try:
            delta = parse_interval(s)
        except ValueError:
            delta = None
        if delta is not None:
            return CommitTs(statement_time.wall + int(delta.total_seconds() * 1e9), 0)
    from changefeed.engine.temporal_text import parse_timestamp

    try:
        t = parse_timestamp(s)
    except ValueError:
        raise InvalidOption(
            f'could not parse "{s}" as a timestamp for option {option} (expected an HLC decimal such as '
            "1536242855577149065.0000000000, nanoseconds, a timestamp, or a negative interval)"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return CommitTs(int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000, 0)


def hlc_string(ts: CommitTs) -> str:
    """``hlc.Timestamp.String()``: ``<seconds>.<nanos 9 digits>,<logical>``."""
    return f"{ts.wall // 1_000_000_000}.{ts.wall % 1_000_000_000:09d},{ts.logical}"


def as_datetime(ns: int | None) -> dt.datetime | None:
    if ns is None:
        return None
    return dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.UTC).replace(
        microsecond=(ns // 1000) % 1_000_000
    )


def now_ns() -> int:
    return time.time_ns()


def render_options(options: Mapping[str, str | None]) -> str:
    """``WITH OPTIONS (a = 'x', flag)`` as CockroachDB describes a job: sorted, flags bare."""
    parts = []
    for k in sorted(options):
        v = options[k]
        parts.append(k if v is None else f"{k} = '{v.replace(chr(39), chr(39) * 2)}'")
    return f" WITH OPTIONS ({', '.join(parts)})" if parts else ""
