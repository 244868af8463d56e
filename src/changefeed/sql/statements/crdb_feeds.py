"""CockroachDB changefeeds: ``CREATE CHANGEFEED FOR ... [INTO sink] [WITH ...]``, ``EXPERIMENTAL
CHANGEFEED FOR ...``, and ``SHOW CHANGEFEED JOBS`` / ``SHOW JOBS``.

Core changefeeds (``EXPERIMENTAL CHANGEFEED FOR t[, ..]``, or ``CREATE CHANGEFEED FOR ..`` without
``INTO``) run in one write transaction: it resolves the targets, checks privileges, validates the
options against the statement's timestamp, turns the tables' change streams on where they are
off, and records where each stream stands at the start point. The rows then stream from
:class:`changefeed.pipeline.sinkless.CoreChangefeed`, outside any transaction (``Connection.stream``,
``changefeed sql``); ``execute()`` of one returns its rows only when it ends by itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from changefeed.engine.catalog import TableSchema
from changefeed.engine.gc import gc_threshold
from changefeed.engine.privileges import check_changefeed_privileges
from changefeed.engine.txn import Transaction
from changefeed.exceptions import GcThresholdError, InvalidStatement, UnsupportedFeature
from changefeed.feeds.crdb_options import (
    FORMAT_JSON,
    VIRTUAL_COLUMNS_OMITTED,
    CrdbOptions,
    parse_crdb_options,
)
from changefeed.feeds.jobs import gc_threshold_error
from changefeed.formats.crdb_json import families
from changefeed.pipeline.sinkless import CoreChangefeed, CorePlan
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import enable_changes
from changefeed.sql.statements.crdb_query import plan_query

FAMILY = StatementFamily("crdb_feeds")


@FAMILY.statement(ast.CreateChangefeed)
def create_changefeed(session: Session, txn: Transaction, s: ast.CreateChangefeed, ev: Params) -> Result:
    if s.sink is not None and not s.core:  # an enterprise changefeed: a job (crdb_jobs)
        from changefeed.sql.statements.crdb_jobs import create_job

        return create_job(session, txn, s, ev)
    if is_core_changefeed(s):  # Connection.execute/stream and changefeed sql take these first
        raise InvalidStatement(
            "a core changefeed streams its rows to the client: read it with Connection.stream() "
            "or changefeed sql"
        )
    raise UnsupportedFeature(
        "CREATE CHANGEFEED / EXPERIMENTAL CHANGEFEED FOR (CockroachDB) are not available yet"
    )


@FAMILY.show("changefeeds")
def show_jobs(session: Session, txn: Transaction, s: ast.Show) -> Result:
    """Every feed of the database (YDB and CockroachDB) with its state."""
    rows = [
        tuple(r)
        for r in txn.conn.execute(
            "SELECT f.id, c.name, f.name, f.kind, f.state FROM _feeds f"
            " JOIN _catalog c ON c.id = f.table_id ORDER BY f.id"
        )
    ]
    return Result(columns=["id", "table", "name", "kind", "state"], rows=rows, types=[None] * 5)


# ============================================================================ core changefeeds

#: Result columns of a core changefeed (CockroachDB: ``table STRING, key BYTES, value BYTES``).
CORE_COLUMNS = ["table", "key", "value"]


def is_core_changefeed(stmt: object) -> TypeGuard[ast.CreateChangefeed]:
    """A changefeed that streams to the client: ``EXPERIMENTAL CHANGEFEED`` or no ``INTO``."""
    return isinstance(stmt, ast.CreateChangefeed) and (stmt.core or stmt.sink is None)


def option_strings(
    session: Session, stmt: ast.CreateChangefeed, params: Sequence[Any]
) -> dict[str, str | None]:
    """The ``WITH`` clause as option name -> string value (None for a flag without a value)."""
    ev = Params(params)
    raw: dict[str, str | None] = {}
    for name, expr in stmt.options:
        if expr is None:
            raw[name] = None
            continue
        value = session.option_value(expr, ev)
        if isinstance(value, bool):
            raw[name] = "true" if value else "false"
        elif value is None:
            raw[name] = None
        else:
            raw[name] = str(value)
    return raw


def check_privileges(session: Session, txn: Transaction, tables: Sequence[TableSchema]) -> None:
    """A core changefeed needs the CHANGEFEED privilege, or SELECT, on every target table."""
    check_changefeed_privileges(txn.conn, session.user, tables, core=True)


def _targets(
    session: Session, txn: Transaction, stmt: ast.CreateChangefeed
) -> tuple[list[TableSchema], list[str | None]]:
    """The target tables, and each one's ``FAMILY`` (None: the whole table)."""
    tables: list[TableSchema] = []
    chosen: list[str | None] = []
    for target in stmt.targets:
        schema = session.resolve_table(txn, target.table)
        family = None if target.family is None else session.ident(target.family)
        if any(t.id == schema.id and f == family for t, f in zip(tables, chosen, strict=True)):
            name = schema.short_name + ("" if family is None else f" FAMILY {family}")
            raise InvalidStatement(f"CHANGEFEED targets TABLE {name} and TABLE {name} are duplicates")
        if family is not None and family not in families(schema):
            raise InvalidStatement(
                f"CHANGEFEED targeting nonexistent or removed column family {family} of table "
                f"{schema.short_name}"
            )
        tables.append(schema)
        chosen.append(family)
    return tables, chosen


def _families(table: TableSchema, family: str | None, opts: CrdbOptions) -> tuple[str, ...]:
    """The families whose messages a target emits, () for whole rows."""
    if family is not None:
        return (family,)
    names = families(table)
    if opts.split_column_families:
        return tuple(names)
    if len(names) > 1:
        raise InvalidStatement(
            f"CHANGEFEED targeting a table ({table.short_name}) with multiple column families requires "
            "WITH split_column_families and will emit multiple events per row."
        )
    return ()


def _notices(tables: Sequence[TableSchema], opts: CrdbOptions) -> list[str]:
    out = list(opts.notices)
    if opts.virtual_columns == VIRTUAL_COLUMNS_OMITTED:
        for t in tables:
            out += [
                f"Changefeeds will filter out values for virtual column {c.name} in table {t.short_name}"
                for c in t.columns
                if c.virtual
            ]
    return out


def prepare_core(session: Session, stmt: ast.CreateChangefeed, params: Sequence[Any] = ()) -> CorePlan:
    """Run the statement's transaction and return what the changefeed streams."""
    if session.in_transaction:
        raise InvalidStatement("a core changefeed cannot run inside an explicit transaction")
    raw = option_strings(session, stmt, params)
    plans: list[CorePlan] = []

    def run(txn: Transaction) -> Result:
        assert txn.ts is not None
        query = None
        if stmt.query is not None:  # CREATE CHANGEFEED [WITH ..] AS SELECT ..
            planned = plan_query(session, txn, stmt, job=False)
            query = planned.query
            tables, chosen = [planned.table], list[str | None]([None])
        else:
            tables, chosen = _targets(session, txn, stmt)
        check_privileges(session, txn, tables)
        opts = parse_crdb_options(raw, sink_scheme=None, statement_time=txn.ts, query=query is not None)
        opts = replace(opts, cluster_id=session.db.cluster_id())
        fams = tuple(_families(t, f, opts) for t, f in zip(tables, chosen, strict=True))
        if any(fams) and opts.format != FORMAT_JSON:
            raise UnsupportedFeature("column families are supported with format=json only")
        start = opts.cursor or txn.ts
        ready: list[TableSchema] = []
        for t in tables:
            threshold = gc_threshold(txn.conn, t) if t.changes else None
            if opts.cursor is not None and threshold is not None and opts.cursor < threshold:
                raise gc_threshold_error(opts.cursor, threshold)
            if not t.changes:
                if opts.cursor is not None and opts.cursor < txn.ts:
                    raise GcThresholdError(
                        f"could not create changefeed: cursor {opts.cursor.crdb()} is older than the GC "
                        f"threshold {txn.ts.wall}: table {t.short_name} keeps no history before "
                        f"{txn.ts.crdb()}\nHINT: use a more recent cursor"
                    )
                t = enable_changes(session, txn, t, True)
            ready.append(t)
        seqs = []
        for t in ready:
            seqs.append(
                int(
                    txn.conn.execute(
                        f"SELECT COALESCE(MAX(seq), 0) FROM x{t.id} WHERE ts < ? OR (ts = ? AND lg <= ?)",
                        (start.wall, start.wall, start.logical),
                    ).fetchone()[0]
                )
            )
        plans.append(
            CorePlan(
                db_path=session.db.path.absolute(),
                tables=tuple(ready),
                options=opts,
                start=start,
                start_seqs=tuple(seqs),
                notices=tuple(_notices(ready, opts)),
                families=fams,
                query=query,
            )
        )
        return Result(status="EXPERIMENTAL CHANGEFEED")

    session.run(run, write=True)
    return plans[0]


def start_core(session: Session, stmt: ast.CreateChangefeed, params: Sequence[Any] = ()) -> CoreChangefeed:
    """Run a core changefeed statement; iterate the result for its messages."""
    return CoreChangefeed(session.db, prepare_core(session, stmt, params))


def run_bounded(session: Session, stmt: ast.CreateChangefeed, params: Sequence[Any] = ()) -> Result:
    """``execute()`` of a core changefeed: all its rows as one result. Only for changefeeds that
    end by themselves (``end_time``, ``initial_scan_only``); others stream for ever."""
    feed = start_core(session, stmt, params)
    opts = feed.plan.options
    if opts.end_time is None and not opts.initial_scan_only:
        feed.close()
        raise InvalidStatement(
            "a core changefeed streams its rows until it is cancelled: read it with Connection.stream() "
            "(or `changefeed sql`), or give it end_time or initial_scan_only"
        )
    with feed:
        rows = list(feed)
    return Result(columns=list(CORE_COLUMNS), rows=rows, types=[None] * 3)
