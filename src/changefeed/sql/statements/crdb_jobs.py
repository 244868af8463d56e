"""The CockroachDB job statements: ``CREATE CHANGEFEED .. INTO``, ``SHOW CHANGEFEED JOB(S)``,
``PAUSE/RESUME/CANCEL JOB``, ``ALTER CHANGEFEED``.

Each runs inside the statement's transaction: a job row in ``_jobs`` and one ``crdb`` feed per
target table in ``_feeds`` are created (or changed) together with the statement, or not at all.
Validation happens before anything is written, with CockroachDB's error texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from changefeed.engine import privileges
from changefeed.engine.clock import CommitTs
from changefeed.engine.txn import Transaction
from changefeed.engine.type_errors import sql_text
from changefeed.exceptions import (
    InvalidOption,
    InvalidStatement,
    JobNotFound,
    JobStateError,
    PermissionDenied,
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.feeds import external_connections, jobs as J
from changefeed.feeds.cdc_plan import CdcQuery
from changefeed.feeds.crdb_options import (
    FORMAT_JSON,
    OPTION_KINDS,
    ORDERING_TOTAL,
    CrdbOptions,
    parse_crdb_options,
)
from changefeed.feeds.kafka_config import KafkaConfig
from changefeed.feeds.runners import runner_live
from changefeed.feeds.sinks import SinkSpec, parse_sink_uri, validate_sink_options
from changefeed.feeds.spec import NS_PER_S, FeedSpec, Mode
from changefeed.feeds.status import job_running_statuses
from changefeed.feeds.store import insert_feed
from changefeed.formats.crdb_json import families
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import crdb_query
from changefeed.sql.statements.common import enable_changes
from changefeed.sql.statements.crdb_query import plan_query
from changefeed.topics import TopicStore

FAMILY = StatementFamily("crdb_jobs")

if TYPE_CHECKING:
    from changefeed.engine.catalog import TableSchema

#: Options ``ALTER CHANGEFEED .. SET/UNSET`` may not change.
UNALTERABLE = ("initial_scan", "initial_scan_only", "no_initial_scan", "end_time", "cursor")
#: Options of ``ALTER CHANGEFEED .. ADD t WITH ..``.
ADD_OPTIONS = ("initial_scan", "no_initial_scan")

#: CockroachDB format names -> encoder names in changefeed.formats.
FORMAT_ENCODERS = {
    "json": "crdb-json",
    "avro": "crdb-avro",
    "experimental_avro": "crdb-avro",
    "csv": "crdb-csv",
    "parquet": "crdb-parquet",
}


# ==================================================================================== helpers
def _result(columns: list[str], rows: list[tuple[Any, ...]]) -> Result:
    return Result(columns=columns, rows=rows, types=[None] * len(columns))


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def raw_options(session: Session, options: Sequence[ast.Option], ev: Any) -> dict[str, str | None]:
    """Option name -> text value (``None`` for a bare flag), names lower-cased, last one wins."""
    out: dict[str, str | None] = {}
    for name, expr in options:
        out[name.lower()] = None if expr is None else _text(session.option_value(expr, ev))
    return out


def _check_control(session: Session, txn: Transaction, job: J.Job) -> None:
    """Job control: the job's owner (or its role), an admin, CONTROLJOB, or CHANGEFEED on its tables."""
    live = {t.id: t for t in session.db.tables()}
    tables = [live[x.table_id] for x in job.targets if x.table_id in live]
    privileges.check_job_control(txn.conn, session.user, job.user_name, job.id, tables)


def _target_text(t: ast.ChangefeedTarget, session: Session) -> str:
    name = ".".join(p.name for p in t.table.parts)
    return f"TABLE {name}" + (f" FAMILY {session.ident(t.family)}" if t.family else "")


def _resolve_targets(
    session: Session, txn: Transaction, targets: Sequence[ast.ChangefeedTarget], opts: CrdbOptions
) -> list[J.Target]:
    seen: dict[tuple[int, str | None], str] = {}
    out = []
    for t in targets:
        try:
            schema = session.resolve_table(txn, t.table)
        except UndefinedTable:
            name = ".".join(p.name for p in t.table.parts)
            raise UndefinedTable(
                f'failed to resolve targets in the CHANGEFEED stmt: table "{name}" does not exist'
            ) from None
        family = session.ident(t.family) if t.family else None
        text = _target_text(t, session)
        key = (schema.id, family)
        if key in seen:
            raise InvalidStatement(f"CHANGEFEED targets {seen[key]} and {text} are duplicates")
        seen[key] = text
        out.extend(family_targets(schema, family, opts))
    return out


# ---- column families (one feed per family: FAMILY targets, split_column_families) ----------
def family_targets(schema: TableSchema, family: str | None, opts: CrdbOptions) -> list[J.Target]:
    """The feeds' targets of ``TABLE t [FAMILY f]``: the whole table, the named family, or with
    ``split_column_families`` each family of the table (topic ``t.family`` each), with
    CockroachDB's errors for a missing family and for several families without the option."""
    names = families(schema)
    if family is not None and family not in names:
        raise InvalidStatement(
            f"CHANGEFEED targeting nonexistent or removed column family {family} of table {schema.short_name}"
        )
    if family is None and not opts.split_column_families and len(names) > 1:
        raise InvalidStatement(
            f"CHANGEFEED targeting a table ({schema.short_name}) with multiple column families requires "
            "WITH split_column_families and will emit multiple events per row."
        )
    chosen = [family] if family is not None else names if opts.split_column_families else [None]
    if chosen != [None] and opts.format != FORMAT_JSON:
        raise UnsupportedFeature("column families are supported with format=json only")
    return [J.Target(schema.id, schema.short_name, f) for f in chosen]


def description(targets: Sequence[str], sink: str, options: Mapping[str, str | None]) -> str:
    """``sink``: the URI as shown (secrets redacted, or the ``external://`` name)."""
    return f"CREATE CHANGEFEED FOR {', '.join(targets)} INTO '{sink}'" + J.render_options(options)


def query_description(sink: str, options: Mapping[str, str | None]) -> str:
    """A CDC query job's description, before its ``AS SELECT``."""
    return f"CREATE CHANGEFEED INTO '{sink}'" + J.render_options(options)


def total_order_topic(sink: SinkSpec, job_id: int) -> str:
    """The one topic of an ``ordering = 'total'`` job: the sink URI's ``topic_name`` (after its
    ``topic_prefix``), else ``<topic_prefix>changefeed_<job id>``."""
    name = sink.params.get("topic_name") or f"changefeed_{job_id}"
    return sink.topic_prefix + name


# ==================================================================================== options
@dataclass(frozen=True, slots=True)
class JobOptions:
    """What the job (not the encoder) does with its options, validated by
    :func:`~changefeed.feeds.crdb_options.parse_crdb_options` (CockroachDB's error texts)."""

    crdb: CrdbOptions

    @property
    def on_error(self) -> str:
        return str(self.crdb.on_error)

    @property
    def cursor(self) -> CommitTs | None:
        return self.crdb.cursor

    @property
    def end(self) -> CommitTs | None:
        return self.crdb.end_time

    @property
    def scan_mode(self) -> str:
        return str(self.crdb.initial_scan)

    @property
    def resolved_ns(self) -> int | None:
        """Resolved messages at most this often: never more often than min_checkpoint_frequency."""
        return (self.crdb.resolved_interval_ns(core=False) or 1) if self.crdb.resolved else None

    @property
    def format(self) -> str:
        return "avro" if self.crdb.format == "experimental_avro" else str(self.crdb.format)

    @property
    def encoder(self) -> str:
        return FORMAT_ENCODERS.get(self.format, self.format)

    @property
    def mode(self) -> Mode:
        """What the messages carry, in the terms of the feed spec: ``before`` only with diff."""
        return Mode.NEW_AND_OLD_IMAGES if self.crdb.diff else Mode.NEW_IMAGE


def job_options(
    raw: Mapping[str, str | None],
    sink: SinkSpec,
    statement_time: CommitTs,
    *,
    check_times: bool = True,
    query: bool = False,
) -> JobOptions:
    """Parse a job's options; ``check_times``: check cursor/end_time against ``statement_time``;
    ``query``: a CDC query's job (``envelope`` defaults to ``bare``)."""
    return JobOptions(
        parse_crdb_options(
            dict(raw),
            sink_scheme=sink.scheme,
            statement_time=statement_time if check_times else None,
            query=query,
        )
    )


# ==================================================================================== CREATE
def _gc_threshold(txn: Transaction, schema: TableSchema) -> CommitTs | None:
    from changefeed.engine.gc import gc_threshold

    return gc_threshold(txn.conn, schema)


def _start_seq(txn: Transaction, schema: TableSchema, at: CommitTs | None) -> int:
    """The change-stream position a feed starts after: the last row committed at or before ``at``
    (everything so far when ``at`` is None)."""
    if at is None:
        row = txn.conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{schema.id}").fetchone()
    else:
        row = txn.conn.execute(
            f"SELECT COALESCE(MAX(seq), 0) FROM x{schema.id} WHERE ts < ? OR (ts = ? AND lg <= ?)",
            (at.wall, at.wall, at.logical),
        ).fetchone()
    return int(row[0])


def _make_feed(
    session: Session,
    txn: Transaction,
    job_id: int,
    target: J.Target,
    sink: SinkSpec,
    opts: JobOptions,
    *,
    initial_scan: bool,
    cursor: CommitTs | None,
    query: CdcQuery | None = None,
) -> FeedSpec:
    """Create (in ``txn``) the ``crdb`` feed of one target; returns its spec."""
    assert txn.ts is not None
    schema = session.db.table_by_id(target.table_id)
    threshold = _gc_threshold(txn, schema)
    if cursor is not None:
        if not schema.changes:
            threshold = txn.ts  # no history kept for this table before now
        if threshold is not None and cursor < threshold:
            raise J.gc_threshold_error(cursor, threshold)
    if not schema.changes:
        schema = enable_changes(session, txn, schema, True)
        if threshold is None:  # no history before now
            from changefeed.engine.gc import set_gc_threshold

            set_gc_threshold(txn.conn, schema, txn.ts)
    seq = _start_seq(txn, schema, cursor)
    start = cursor or txn.ts
    total = opts.crdb.ordering == ORDERING_TOTAL
    if total and target.family is not None:
        raise InvalidOption("ordering = 'total' is incompatible with column family targets")
    spec = FeedSpec(
        id=0,
        table_id=schema.id,
        name=f"job {job_id}" + (f" {target.family}" if target.family else ""),
        kind="crdb",
        # ordering = 'total': every feed of the job delivers into the job's one topic, one partition
        topic=(
            total_order_topic(sink, job_id)
            if total
            else sink.topic_for(target.name, target.family, full_table_name=_full_name(target.name, opts))
        ),
        partitions=1 if total else schema.partitions,
        format=opts.encoder,
        mode=opts.mode,
        resolved_ns=opts.resolved_ns,
        initial_scan=initial_scan,
        created_seq=seq,
        created_wall=start.wall,
        created_logical=start.logical,
        created_tx=txn.txid,
        crdb=replace(opts.crdb, job_id=job_id, cluster_id=session.db.cluster_id()),
        family=target.family,
        query=query,
    )
    spec = insert_feed(txn.conn, spec, "scanning" if initial_scan else "running")
    TopicStore(session.db.path).ensure_topic(spec.topic, spec.partitions, spec.retention_ns)
    return spec


def _full_name(table: str, opts: JobOptions) -> str | None:
    """``db.schema.table`` with ``full_table_name`` (the Kafka sink's topic names), else None."""
    return opts.crdb.topic_name(table) if opts.crdb.full_table_name else None


def _save_spec(txn: Transaction, spec: FeedSpec) -> None:
    txn.conn.execute(
        "UPDATE _feeds SET spec = ? WHERE id = ?", (orjson.dumps(spec.to_json()).decode(), spec.id)
    )


def create_job(session: Session, txn: Transaction, stmt: ast.CreateChangefeed, ev: Params) -> Result:
    """``CREATE CHANGEFEED .. INTO``: called by the ``crdb_feeds`` family for statements with a sink."""
    assert stmt.sink is not None and txn.ts is not None
    uri = session.option_value(stmt.sink, ev)
    if not isinstance(uri, str):
        raise InvalidOption(
            f"the sink of CREATE CHANGEFEED .. INTO must be a string URI, got {sql_text(uri)}"
        )
    written, uri = uri, external_connections.resolve(txn.conn, uri)
    sink = parse_sink_uri(uri)
    shown = written if external_connections.is_external(written) else sink.redacted
    raw = raw_options(session, stmt.options, ev)
    query = None
    if stmt.query is not None:  # CREATE CHANGEFEED INTO .. AS SELECT ..
        planned = plan_query(session, txn, stmt, job=True)
        query = planned.query
    opts = job_options(raw, sink, txn.ts, query=query is not None)
    config = validate_sink_options(sink, raw)  # sinks: webhook / cloud storage / kafka settings
    if isinstance(config, KafkaConfig):
        # CockroachDB dials the sink at CREATE: an unreachable broker is an error here.
        from changefeed.pipeline.sinks.kafka import dial

        dial(config)
    if query is not None:
        schema = session.db.table_by_id(query.table_id)
        targets = [J.Target(schema.id, schema.short_name, None)]
    else:
        targets = _resolve_targets(session, txn, stmt.targets, opts.crdb)
    privileges.check_changefeed_privileges(
        txn.conn, session.user, [session.db.table_by_id(t.table_id) for t in targets]
    )
    J.ensure_table(txn.conn)
    job_id = J.new_job_id(txn.conn, txn.ts)
    specs = [
        _make_feed(
            session,
            txn,
            job_id,
            t,
            sink,
            opts,
            initial_scan=opts.scan_mode in ("yes", "only"),
            cursor=opts.cursor,
            query=query,
        )
        for t in targets
    ]
    now = txn.ts.wall
    job = J.Job(
        id=job_id,
        description=(
            description([_target_text(t, session) for t in stmt.targets], shown, raw)
            if stmt.query is None
            else query_description(shown, raw) + crdb_query.description(stmt)
        ),
        user_name=session.user,
        status=J.RUNNING,
        running_status=None,
        created=now,
        started=now,
        finished=None,
        modified=now,
        high_water=None,
        error=None,
        sink_uri=shown,
        full_table_names=tuple(dict.fromkeys(f"defaultdb.public.{t.name}" for t in targets)),
        topics=tuple(dict.fromkeys(s.topic for s in specs)),
        format=opts.format,
        options=raw,
        targets=tuple(targets),
        feed_ids=tuple(s.id for s in specs),
        start=opts.cursor or txn.ts,
        end=opts.end,
        scan_only=opts.scan_mode == "only",
        on_error=opts.on_error,
        sink=uri,
    )
    J.insert_job(txn.conn, job)
    return _result(["job_id"], [(job_id,)])


# ==================================================================================== SHOW
SHOW_COLUMNS = [
    "job_id", "description", "user_name", "status", "running_status", "created", "started", "finished",
    "modified", "high_water_timestamp", "readable_high_water_timestamptz", "error", "sink_uri",
    "full_table_names", "topics", "format",
]  # fmt: skip
SHOW_RECENT_NS = 12 * 3600 * NS_PER_S


def _naive(ns: int | None) -> Any:
    d = J.as_datetime(ns)
    return None if d is None else d.replace(tzinfo=None)


def show_row(job: J.Job) -> tuple[Any, ...]:
    hw = job.high_water
    return (
        job.id,
        job.description,
        job.user_name,
        job.status,
        job.running_status,
        _naive(job.created),
        _naive(job.started),
        _naive(job.finished),
        _naive(job.modified),
        None if hw is None else Decimal(hw.crdb()),
        None if hw is None else J.as_datetime(hw.wall),
        job.error or "",
        job.sink_uri,
        list(job.full_table_names),
        ",".join(job.topics),
        job.format,
    )


@FAMILY.show("changefeed jobs")
def show_jobs(session: Session, txn: Transaction, s: ast.Show | None = None) -> Result:
    now = session.db.clock.now_ns()
    admin = privileges.is_admin(txn.conn, session.user)
    jobs = [
        j
        for j in J.all_jobs(txn.conn)
        if (j.finished is None or now - j.finished <= SHOW_RECENT_NS)
        and (admin or j.user_name == session.user)
    ]
    jobs.sort(key=lambda j: (-(j.finished or now), -(j.started or 0)))
    live = _live(session, txn) if jobs else {}
    return _result(list(SHOW_COLUMNS), [show_row(replace(j, running_status=live.get(j.id))) for j in jobs])


def _live(session: Session, txn: Transaction) -> dict[int, str | None]:
    """job id -> its ``running_status`` now: whether a pipeline holds it and what it does."""
    return job_running_statuses(txn.conn, session.db.path, session.db.clock.now_ns())


SHOW_JOBS_COLUMNS = [
    "job_id", "job_type", "description", "statement", "user_name", "status", "running_status", "created",
    "started", "finished", "modified", "fraction_completed", "error", "coordinator_id",
]  # fmt: skip


@FAMILY.show("jobs")
def show_all_jobs(session: Session, txn: Transaction, s: ast.Show | None = None) -> Result:
    """``SHOW JOBS``: CockroachDB's general job listing (here every job is a changefeed)."""
    return _result(list(SHOW_JOBS_COLUMNS), [jobs_row(r) for r in show_jobs(session, txn).rows])


def jobs_row(changefeed_row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``SHOW JOBS`` row from the job's ``SHOW CHANGEFEED JOBS`` row (:func:`show_row`)."""
    d = dict(zip(SHOW_COLUMNS, changefeed_row, strict=True))
    done = 1.0 if d["status"] == J.SUCCEEDED else 0.0
    return (d["job_id"], J.JOB_TYPE, d["description"], "", d["user_name"], d["status"], d["running_status"],
            d["created"], d["started"], d["finished"], d["modified"], done, d["error"], None)  # fmt: skip


@FAMILY.statement(ast.ShowChangefeedJob, write=False)
def show_job(session: Session, txn: Transaction, stmt: ast.ShowChangefeedJob, ev: Params) -> Result:
    job_id = J.parse_job_id(session.option_value(stmt.job_id, ev))
    job = J.get_job(txn.conn, job_id)
    if job is None or not (privileges.is_admin(txn.conn, session.user) or job.user_name == session.user):
        return _result(list(SHOW_COLUMNS), [])
    live = _live(session, txn)
    return _result(list(SHOW_COLUMNS), [show_row(replace(job, running_status=live.get(job.id)))])


# ==================================================================================== control
@FAMILY.statement(ast.JobControl)
def job_control(session: Session, txn: Transaction, stmt: ast.JobControl, ev: Params) -> Result:
    job_id = J.parse_job_id(session.option_value(stmt.job_id, ev))
    job = J.load_job(txn.conn, job_id)
    _check_control(session, txn, job)
    now = session.db.clock.now_ns()
    if stmt.action == "pause":
        J.pause(txn.conn, job, now, requested=runner_live(session.db.path))
    elif stmt.action == "resume":
        J.resume(txn.conn, job, now)
    else:
        J.cancel(txn.conn, job, now)
    return Result(status=f"{stmt.action.upper()} JOB")


# ==================================================================================== external connections
@FAMILY.statement(ast.CreateExternalConnection)
def create_external_connection(
    session: Session, txn: Transaction, stmt: ast.CreateExternalConnection, ev: Params
) -> Result:
    """``CREATE EXTERNAL CONNECTION name AS 'uri'``: admins (CockroachDB's EXTERNALCONNECTION
    privilege); the URI must be a sink URI this build knows."""
    if not privileges.is_admin(txn.conn, session.user):
        raise PermissionDenied(f"user {session.user} does not have EXTERNALCONNECTION system privilege")
    uri = session.option_value(stmt.uri, ev)
    if not isinstance(uri, str):
        raise InvalidOption(f"the URI of CREATE EXTERNAL CONNECTION must be a string, got {uri!r}")
    if external_connections.is_external(uri):
        raise InvalidOption("external connection cannot have scheme external")
    parse_sink_uri(uri)  # validated as CockroachDB validates a connection's URI at creation
    external_connections.create(
        txn.conn, stmt.name, uri, session.user, session.db.clock.now_ns(), if_not_exists=stmt.if_not_exists
    )
    return Result(status="CREATE EXTERNAL CONNECTION")


@FAMILY.statement(ast.DropExternalConnection)
def drop_external_connection(
    session: Session, txn: Transaction, stmt: ast.DropExternalConnection, ev: Params
) -> Result:
    if not privileges.is_admin(txn.conn, session.user):
        raise PermissionDenied(
            f"user {session.user} does not have DROP privilege on external connection {stmt.name}"
        )
    external_connections.drop(txn.conn, stmt.name, if_exists=stmt.if_exists)
    return Result(status="DROP EXTERNAL CONNECTION")


# ==================================================================================== ALTER
@FAMILY.statement(ast.AlterChangefeed)
def alter_job(session: Session, txn: Transaction, stmt: ast.AlterChangefeed, ev: Params) -> Result:
    assert txn.ts is not None
    raw_id = session.option_value(stmt.job_id, ev)
    job_id = J.parse_job_id(raw_id, what="changefeed ID")
    job = J.get_job(txn.conn, job_id)
    if job is None:
        raise JobNotFound(f"could not load job with job id {job_id}")
    _check_control(session, txn, job)
    if job.status != J.PAUSED:
        raise JobStateError(f"job {job_id} is not paused")
    options = dict(job.options)
    sink_uri = job.sink
    adds: list[tuple[ast.ChangefeedTarget, bool]] = []
    drops: list[ast.ChangefeedTarget] = []
    for cmd in stmt.commands:
        if cmd.kind == "set":
            for name, value in raw_options(session, cmd.options, ev).items():
                if name == "sink":
                    if value is None:
                        raise InvalidOption('option "sink" requires a value')
                    sink_uri = value
                    continue
                if name in UNALTERABLE:
                    raise InvalidOption(f'cannot alter option "{name}"')
                if name not in OPTION_KINDS:
                    raise InvalidOption(f'invalid option "{name}"')
                options[name] = value
        elif cmd.kind == "unset":
            for name in cmd.names:
                if name == "sink":
                    raise InvalidOption('cannot unset option "sink"')
                if name in UNALTERABLE:
                    raise InvalidOption(f'cannot alter option "{name}"')
                if name not in OPTION_KINDS:
                    raise InvalidOption(f'invalid option "{name}"')
                options.pop(name, None)
        elif cmd.kind == "add":
            scan_opts = raw_options(session, cmd.options, ev)
            for name in scan_opts:
                if name not in ADD_OPTIONS:
                    raise InvalidOption(f'invalid option "{name}"')
            if "initial_scan" in scan_opts and "no_initial_scan" in scan_opts:
                raise InvalidOption('cannot specify both "initial_scan" and "no_initial_scan"')
            given = scan_opts.get("initial_scan")
            mode = (given or "yes").lower() if "initial_scan" in scan_opts else "no"
            if mode not in ("yes", "no"):
                raise InvalidOption(f"unknown initial_scan: {given}")
            adds.extend((t, mode == "yes") for t in cmd.targets)
        else:
            drops.extend(cmd.targets)
    old_sink = parse_sink_uri(job.sink)
    sink_uri = external_connections.resolve(txn.conn, sink_uri)
    sink = parse_sink_uri(sink_uri)
    if sink.scheme != old_sink.scheme:
        raise InvalidOption(
            f'New sink type "{sink.scheme}" does not match original sink type "{old_sink.scheme}". Altering the '
            "sink type of a changefeed is disallowed, consider creating a new changefeed instead."
        )
    first = txn.conn.execute("SELECT spec FROM _feeds WHERE id = ?", (job.feed_ids[0],)).fetchone()
    queried = first is not None and FeedSpec.from_json(orjson.loads(first[0])).query is not None
    if queried and (adds or drops):
        raise InvalidStatement(
            "cannot modify targets when using CDC query changefeed; consider recreating changefeed"
        )
    opts = job_options(options, sink, job.start, check_times=False, query=queried)
    validate_sink_options(sink, options)  # sinks: webhook / cloud storage settings
    targets = list(job.targets)
    feed_ids = list(job.feed_ids)
    texts = {t.table_id: f"TABLE {t.name}" for t in targets}
    for d in drops:
        name = ".".join(p.name for p in d.table.parts)
        schema = session.db.find_table(session.table_name(d.table))
        idxs = [i for i, t in enumerate(targets) if schema is not None and t.table_id == schema.id]
        if not idxs:
            raise InvalidStatement(f'target "TABLE {name}" already not watched by changefeed')
        for idx in reversed(idxs):  # every family feed of the table
            targets.pop(idx)
            fid = feed_ids.pop(idx)
            txn.conn.execute(
                "UPDATE _feeds SET state = ?, name = ? WHERE id = ?",
                (J.CANCELED, f"job {job.id} dropped {fid}", fid),
            )
    new_targets = []
    for a, with_scan in adds:
        name = ".".join(p.name for p in a.table.parts)
        schema = session.db.find_table(session.table_name(a.table))
        if schema is None:
            raise UndefinedTable(f'target "TABLE {name}" does not exist')
        if any(t.table_id == schema.id for t in targets):
            raise InvalidStatement(f'target "TABLE {name}" already watched by changefeed')
        for t in family_targets(schema, None, opts.crdb):
            targets.append(t)
            new_targets.append((t, with_scan))
        texts[schema.id] = f"TABLE {name}"
    if not targets:
        raise InvalidStatement("cannot drop all targets")
    # Existing feeds take the new options and sink; added ones start now.
    specs = []
    for fid, t in zip(feed_ids, targets, strict=False):
        row = txn.conn.execute("SELECT spec FROM _feeds WHERE id = ?", (fid,)).fetchone()
        spec = FeedSpec.from_json(orjson.loads(row[0]))
        spec = replace(
            spec,
            topic=sink.topic_for(t.name, t.family, full_table_name=_full_name(t.name, opts)),
            format=opts.encoder,
            resolved_ns=opts.resolved_ns,
            mode=opts.mode,
            crdb=replace(opts.crdb, job_id=job.id, cluster_id=session.db.cluster_id()),
        )
        _save_spec(txn, spec)
        TopicStore(session.db.path).ensure_topic(spec.topic, spec.partitions, spec.retention_ns)
        specs.append(spec)
    for t, with_scan in new_targets:
        spec = _make_feed(session, txn, job.id, t, sink, opts, initial_scan=with_scan, cursor=None)
        txn.conn.execute("UPDATE _feeds SET state = ? WHERE id = ?", (J.FEED_PAUSED, spec.id))
        feed_ids.append(spec.id)
        specs.append(spec)
    now = session.db.clock.now_ns()
    new = replace(
        job,
        description=(
            query_description(sink.redacted, options) + " AS " + " ".join(specs[0].query.text.split())
            if queried and specs and specs[0].query is not None
            else description(list(dict.fromkeys(texts[t.table_id] for t in targets)), sink.redacted, options)
        ),
        options=options,
        sink=sink_uri,
        sink_uri=sink.redacted,
        targets=tuple(targets),
        feed_ids=tuple(feed_ids),
        full_table_names=tuple(dict.fromkeys(f"defaultdb.public.{t.name}" for t in targets)),
        topics=tuple(dict.fromkeys(s.topic for s in specs)),
        format=opts.format,
        on_error=opts.on_error,
        modified=now,
    )
    J.save_job(txn.conn, new)
    return Result(status="ALTER CHANGEFEED")


# ==================================================================================== tables
@FAMILY.alter_action(ast.ConfigureZone)
def configure_zone(
    session: Session, txn: Transaction, schema: TableSchema, action: ast.ConfigureZone, ev: Params
) -> TableSchema:
    """``ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = n``: the table's GC TTL."""
    from changefeed.engine.gc import configure_zone as zone_options

    zone = zone_options(schema, [(k, session.option_value(v, ev)) for k, v in action.options])
    new = replace(schema, options={**schema.options, **zone}, version=schema.version + 1)
    session.db.save_table(new)
    session.db.refresh_catalog()
    return session.db.table_by_id(new.id)


@FAMILY.on_drop_table
def on_drop_table(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """A watched table is dropped: its jobs fail (CockroachDB: ``"t" was dropped``)."""
    J.on_table_dropped(txn.conn, schema.id, schema.short_name, session.db.clock.now_ns())
