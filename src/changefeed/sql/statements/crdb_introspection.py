"""What CockroachDB's tools ask about jobs: ``SHOW JOB [WHEN COMPLETE] id``, ``SHOW JOBS [WHEN
COMPLETE] <select>``, ``SHOW CHANGEFEED JOBS <select>`` and the ``crdb_internal.jobs`` table.

``WHEN COMPLETE`` returns once every job the statement names has finished (succeeded, failed or
was canceled), as CockroachDB's does: the statement polls the jobs table outside any lock
(:class:`~changefeed.sql.session.RunAgain`) and gives up with CockroachDB's ``timed out waiting
for jobs`` after a day. It cannot run inside an explicit transaction, whose snapshot never sees
the jobs move.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from changefeed.engine import privileges
from changefeed.engine.txn import Transaction
from changefeed.exceptions import ActiveTransaction, JobStateError
from changefeed.feeds import jobs as J
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import RunAgain, Session, StatementFamily
from changefeed.sql.statements.crdb_jobs import SHOW_COLUMNS, SHOW_JOBS_COLUMNS, jobs_row, show_row
from changefeed.sql.statements.select import VIRTUAL_RELATIONS, Relation

FAMILY = StatementFamily("crdb_introspection")

#: How often ``WHEN COMPLETE`` looks at the jobs again, and when it gives up (CockroachDB: 24h).
POLL_S = 0.25
WAIT_TIMEOUT_S = 24 * 3600.0


def _visible(session: Session, txn: Transaction) -> Any:
    """A predicate: whether the session's user may see a job (an admin, or the job's owner)."""
    admin = privileges.is_admin(txn.conn, session.user)
    return lambda job: admin or job.user_name == session.user


def _job_ids(session: Session, txn: Transaction, stmt: ast.ShowJobsOf, ev: Params) -> list[int]:
    if stmt.job_id is not None:
        return [J.parse_job_id(session.option_value(stmt.job_id, ev))]
    assert stmt.query is not None
    res = session.statements.handler(stmt.query).run(session, txn, stmt.query, ev)
    if len(res.columns) != 1:
        raise JobStateError(
            f"SHOW JOBS expects a query of one column of job IDs, got {len(res.columns)} columns"
        )
    return [J.parse_job_id(r[0]) for r in res.rows if r[0] is not None]


@FAMILY.statement(ast.ShowJobsOf, write=False)
def show_jobs_of(session: Session, txn: Transaction, stmt: ast.ShowJobsOf, ev: Params) -> Result:
    if stmt.block and session.in_transaction:
        # its snapshot would never see the jobs finish
        raise ActiveTransaction("SHOW JOBS WHEN COMPLETE cannot run inside a transaction block")
    ids = list(dict.fromkeys(_job_ids(session, txn, stmt, ev)))
    visible = _visible(session, txn)
    jobs = [j for j in (J.get_job(txn.conn, i) for i in ids) if j is not None and visible(j)]
    if stmt.block and any(j.finished is None for j in jobs):
        raise RunAgain(POLL_S, WAIT_TIMEOUT_S, JobStateError("timed out waiting for jobs"))
    rows = [show_row(j) for j in jobs]
    if stmt.changefeed:
        return Result(columns=list(SHOW_COLUMNS), rows=rows, types=[None] * len(SHOW_COLUMNS))
    return Result(
        columns=list(SHOW_JOBS_COLUMNS),
        rows=[jobs_row(r) for r in rows],
        types=[None] * len(SHOW_JOBS_COLUMNS),
    )


# ------------------------------------------------------------------------ crdb_internal.jobs
#: CockroachDB's ``crdb_internal.jobs`` (its virtual table's columns, v24-v25).
INTERNAL_JOBS_COLUMNS = [
    "job_id", "job_type", "description", "statement", "user_name", "descriptor_ids", "status",
    "running_status", "created", "started", "finished", "modified", "fraction_completed",
    "high_water_timestamp", "error", "coordinator_id", "trace_id", "execution_errors", "execution_events",
]  # fmt: skip


def _internal_row(job: J.Job) -> tuple[Any, ...]:
    hw = job.high_water
    return (
        job.id,
        J.JOB_TYPE,
        job.description,
        "",
        job.user_name,
        sorted({t.table_id for t in job.targets}),
        job.status,
        job.running_status,
        J.as_datetime(job.created),
        J.as_datetime(job.started),
        J.as_datetime(job.finished),
        J.as_datetime(job.modified),
        1.0 if job.status == J.SUCCEEDED else 0.0,
        None if hw is None else Decimal(hw.crdb()),
        job.error or "",
        None,
        None,
        [],
        None,
    )


def internal_jobs(session: Session, txn: Transaction) -> Relation:
    """``crdb_internal.jobs``: every job the user may see, finished ones included, by id."""
    visible = _visible(session, txn)
    rows = [_internal_row(j) for j in J.all_jobs(txn.conn) if visible(j)]
    return Relation(
        "crdb_internal.jobs", list(INTERNAL_JOBS_COLUMNS), [None] * len(INTERNAL_JOBS_COLUMNS), lambda _: rows
    )


def _internal(session: Session, txn: Transaction, name: str) -> Relation | None:
    """``crdb_internal.jobs`` (a real table of that name wins)."""
    if name.lower() != "crdb_internal.jobs" or session.db.find_table(name) is not None:
        return None
    return internal_jobs(session, txn)


VIRTUAL_RELATIONS.append(_internal)
