"""YDB asynchronous replication statements (issue 20) and the secrets their options name.

=================================  ==============================================================
``CREATE ASYNC REPLICATION``       creates, on the source, one changefeed per item (through
                                   :mod:`~changefeed.sql.statements.replication_source`), and here
                                   the read-only replica tables and the replication's rows
``ALTER ASYNC REPLICATION .. SET`` ``STATE = "DONE"`` [``FAILOVER_MODE = "FORCE"``]: completes it
                                   (replicas writable, for good); ``"Paused"`` / ``"StandBy"``:
                                   pauses / resumes the apply; ``USER``, ``PASSWORD_SECRET_NAME``
``DROP ASYNC REPLICATION [CASCADE]``  drops the source's changefeeds, then the replication; CASCADE
                                   also the replicas, otherwise they become ordinary tables
``CREATE [OR REPLACE] SECRET``     ``WITH (value = '..')``; ``DROP SECRET``
``.sys/async_replications``        the system view: one row per item with the replication's
                                   state, error, consistency, lag and initial scan progress
``.sys/table_schemas``             a table's catalog entry as JSON (what a destination reads from
                                   a source to build its replica)
=================================  ==============================================================

Who may: creating a replication or a secret is open to every user (as CREATE TABLE is); the
creator owns both and holds ALL on the replicas; altering or dropping needs the owner or an admin,
as does naming a secret in a replication's options.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import uuid
from dataclasses import replace
from typing import Any

import orjson

from changefeed.engine import replicas
from changefeed.engine.catalog import TableSchema
from changefeed.engine.privileges import check_any_table_privilege
from changefeed.engine.replicas import ReplicaMark
from changefeed.engine.storage import TableStore
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.exceptions import (
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    PermissionDenied,
    ReplicationError,
    UndefinedObject,
)
from changefeed.feeds import replication as R
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import select
from changefeed.sql.statements.replication_source import (
    LocalSource,
    SourceControl,
    changefeed_options,
    open_source,
    replica_schema,
)

FAMILY = StatementFamily("replication")

VIEW = ".sys/async_replications"
SCHEMAS_VIEW = ".sys/table_schemas"


def _name(session: Session, q: ast.QName) -> str:
    return session.table_name(q)


def _options(session: Session, options: tuple[ast.Option, ...], ev: Params) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in options:
        if k in out:
            raise InvalidOption(f"option {k.upper()} is given twice")
        out[k] = session.option_value(v, ev)
    return out


def _may_manage(session: Session, txn: Transaction, owner: str, what: str) -> None:
    if session.user != owner and not session.privileges(txn).admin:
        raise PermissionDenied(
            f"user {session.user} does not own {what} (its owner is {owner}) and is not an admin"
        )


def _password(session: Session, txn: Transaction, secret: str | None) -> str | None:
    if secret is None:
        return None
    owner = R.secret_owner(txn.conn, secret)
    if owner is None:
        raise UndefinedObject(f"secret {secret!r} does not exist")
    _may_manage(session, txn, owner, f"secret {secret!r}")
    return R.secret_value(txn.conn, secret)


def _source(session: Session, txn: Transaction, spec: R.ReplicationSpec) -> SourceControl:
    src = open_source(session, spec, _password(session, txn, spec.password_secret))
    if isinstance(src, LocalSource):
        src.bind(txn)
    return src


# ==================================================================================== secrets


@FAMILY.statement(ast.CreateSecret)
def create_secret(session: Session, txn: Transaction, s: ast.CreateSecret, ev: Params) -> Result:
    if s.or_replace and s.if_not_exists:
        raise InvalidStatement("OR REPLACE and IF NOT EXISTS cannot be used together")
    name = _name(session, s.name)
    opts = _options(session, s.options, ev)
    unknown = sorted(set(opts) - {"value", "inherit_permissions"})
    if unknown:
        raise InvalidOption(
            f"unknown secret option {unknown[0].upper()}; valid options are: VALUE, INHERIT_PERMISSIONS"
        )
    value = opts.get("value")
    if not isinstance(value, str):
        raise InvalidOption("CREATE SECRET needs WITH (value = '...'), a string")
    owner = R.secret_owner(txn.conn, name)
    if owner is not None:
        if s.if_not_exists:
            return Result(status="CREATE SECRET")
        if not s.or_replace:
            raise DuplicateObject(f"secret {name!r} already exists")
        _may_manage(session, txn, owner, f"secret {name!r}")
    R.put_secret(txn.conn, name, value, session.user, replace_=True)
    return Result(status="CREATE SECRET")


@FAMILY.statement(ast.DropSecret)
def drop_secret(session: Session, txn: Transaction, s: ast.DropSecret, ev: Params) -> Result:
    name = _name(session, s.name)
    owner = R.secret_owner(txn.conn, name)
    if owner is None:
        if s.if_exists:
            return Result(status="DROP SECRET")
        raise UndefinedObject(f"secret {name!r} does not exist")
    _may_manage(session, txn, owner, f"secret {name!r}")
    R.drop_secret(txn.conn, name)
    return Result(status="DROP SECRET")


# ==================================================================================== CREATE


@FAMILY.statement(ast.CreateAsyncReplication)
def create_replication(
    session: Session, txn: Transaction, s: ast.CreateAsyncReplication, ev: Params
) -> Result:
    name = _name(session, s.name)
    spec = R.parse_create_options(name, _options(session, s.options, ev), owner=session.user)
    R.ensure_tables(txn.conn)
    if R.find(txn.conn, name) is not None:
        raise DuplicateObject(f"asynchronous replication {name!r} already exists")
    targets = [_name(session, it.target) for it in s.items]
    for t in targets:
        if targets.count(t) > 1:
            raise InvalidStatement(f"replica {t!r} is named twice")
        existing = session.db.find_table(t)
        if existing is not None and existing.name.lower() == t.lower():
            raise DuplicateObject(f'table "{t}" already exists: a replica is created by the replication')
    src = _source(session, txn, spec)
    created: list[tuple[str, str]] = []
    try:
        rid = R.insert_replication(txn.conn, spec, txn.now_ns)
        mark = ReplicaMark(rid, name)
        options = changefeed_options(spec)
        for i, (it, target) in enumerate(zip(s.items, targets, strict=True)):
            source = src.describe(_name(session, it.source))
            if source.is_cql:
                raise InvalidStatement(
                    f"{source.name} is a CQL table: asynchronous replication copies tables of the sql dialect"
                )
            replica = replace(
                replicas.marked(
                    replica_schema(source, table_id=session.db.next_table_id(), name=target), mark
                ),
                version=1,
            )
            for stmt in TableStore(replica).create_sql():
                txn.conn.execute(stmt)
            session.db.save_table(replica)
            _grant_owner(session, txn, replica)
            feed = str(uuid.uuid4())
            src.add_changefeed(source.name, feed, options)
            created.append((source.name, feed))
            R.insert_item(
                txn.conn,
                rid,
                R.Item(
                    item_id=i,
                    source_path=source.name,
                    target_table_id=replica.id,
                    target_name=replica.name,
                    changefeed=feed,
                    topic=f"{source.short_name}/{feed}",
                    partitions=source.partitions,
                    source_table_id=source.id,
                ),
            )
    except BaseException:
        for path, feed in created:
            with contextlib.suppress(Exception):
                src.drop_changefeed(path, feed)
        raise
    finally:
        src.close()
    return Result(status="CREATE ASYNC REPLICATION")


def _grant_owner(session: Session, txn: Transaction, schema: TableSchema) -> None:
    from changefeed.sql.statements import ddl

    ddl.initial_grants(session, txn, schema)


# ==================================================================================== ALTER


def _unmark_replicas(session: Session, txn: Transaction, rep: R.Replication) -> None:
    for item in rep.items:
        try:
            schema = session.db.table_by_id(item.target_table_id)
        except Exception:
            continue
        if replicas.replica_of(schema) is not None:
            session.db.save_table(replicas.marked(schema, None))
    session.db.refresh_catalog()


@FAMILY.statement(ast.AlterAsyncReplication)
def alter_replication(session: Session, txn: Transaction, s: ast.AlterAsyncReplication, ev: Params) -> Result:
    name = _name(session, s.name)
    alter = R.parse_alter_options(_options(session, s.options, ev))
    rep = R.require(txn.conn, name)
    _may_manage(session, txn, rep.spec.owner, f"asynchronous replication {name!r}")
    if rep.state == R.DONE:
        raise InvalidStatement(
            f"asynchronous replication {name!r} is done: a completed replication cannot be resumed or changed"
        )
    if alter.credentials:
        _password(session, txn, alter.password_secret)  # exists, and the user may use it
        R.update_spec(txn.conn, rep.id, R.with_credentials(rep.spec, alter), txn.now_ns)
    if alter.state is None:
        return Result(status="ALTER ASYNC REPLICATION")
    if alter.state == R.DONE:
        # Forced completion (YDB supports only FORCE): no check of lag or consistency. GLOBAL
        # replicas stay at the last barrier applied; changes buffered past it are dropped.
        txn.conn.execute("DELETE FROM _replication_buffer WHERE replication_id = ?", (rep.id,))
        _unmark_replicas(session, txn, rep)
        R.set_state(txn.conn, rep.id, R.DONE, txn.now_ns, rep.error)
    elif rep.state == R.ERROR:
        raise InvalidStatement(
            f"asynchronous replication {name!r} stopped on an error and cannot be resumed: drop it and create"
            f" a new one ({rep.error})"
        )
    else:
        R.set_state(txn.conn, rep.id, alter.state, txn.now_ns)
    return Result(status="ALTER ASYNC REPLICATION")


# ==================================================================================== DROP


@FAMILY.statement(ast.DropAsyncReplication)
def drop_replication(session: Session, txn: Transaction, s: ast.DropAsyncReplication, ev: Params) -> Result:
    name = _name(session, s.name)
    rep = R.require(txn.conn, name)
    _may_manage(session, txn, rep.spec.owner, f"asynchronous replication {name!r}")
    src = _source(session, txn, rep.spec)
    try:
        for item in rep.items:
            try:
                src.drop_changefeed(item.source_path, item.changefeed)
            except UndefinedObject:
                pass  # already gone (its table was dropped on the source)
            except ReplicationError as exc:
                if "does not exist" not in str(exc):
                    raise
    finally:
        src.close()
    _unmark_replicas(session, txn, rep)
    if s.cascade:
        for item in rep.items:
            schema = session.db.find_table(item.target_name)
            if schema is None or schema.id != item.target_table_id:
                continue
            drop = ast.DropTable(ast.QName((ast.Ident(schema.name, True),)), if_exists=True)
            session.statements.handler(drop).run(session, txn, drop, Params(()))
    R.delete_replication(txn.conn, rep.id)
    checkpoint = session.db.path / "checkpoints" / R.checkpoint_name(rep.id)
    txn.after_commit(lambda: shutil.rmtree(checkpoint, ignore_errors=True))
    return Result(status="DROP ASYNC REPLICATION")


# ==================================================================================== system views


def _t(name: str) -> Any:
    return resolve_type(name, dialect="sql")


VIEW_COLUMNS = (
    ("name", "Utf8"),
    ("item", "Uint32"),
    ("source_path", "Utf8"),
    ("destination_path", "Utf8"),
    ("changefeed", "Utf8"),
    ("state", "Utf8"),
    ("error", "Utf8"),
    ("connection_string", "Utf8"),
    ("endpoint", "Utf8"),
    ("database", "Utf8"),
    ("user", "Utf8"),
    ("consistency_level", "Utf8"),
    ("commit_interval", "Interval"),
    ("lag", "Interval"),
    ("initial_scan_progress", "Double"),
    ("consistent_as_of", "Timestamp"),
    ("applied_rows", "Uint64"),
    ("buffered_changes", "Uint64"),
)


def _replications_view(session: Session, txn: Transaction) -> select.Relation:
    now = session.db.clock.now_ns()
    privs = session.privileges(txn)
    rows: list[tuple[Any, ...]] = []
    for st in R.status(txn.conn, now):
        rep = st.replication
        if not privs.admin and session.user != rep.spec.owner:
            continue
        ep = rep.spec.endpoint
        for item, progress in zip(rep.items, st.scan_progress, strict=True):
            rows.append(
                (
                    rep.name,
                    item.item_id,
                    item.source_path,
                    item.target_name,
                    item.changefeed,
                    rep.state,
                    rep.error,
                    ep.text,
                    ep.shown,
                    ep.path if ep.local else ep.database,
                    rep.spec.user,
                    rep.spec.consistency.shown,
                    dt.timedelta(microseconds=rep.spec.commit_interval_ns // 1000)
                    if rep.spec.global_
                    else None,
                    None if st.lag_ns is None else dt.timedelta(microseconds=st.lag_ns // 1000),
                    progress,
                    _timestamp(rep.applied_wall) if rep.spec.global_ and rep.applied_wall else None,
                    rep.applied_rows,
                    st.buffered,
                )
            )
    names = [n for n, _ in VIEW_COLUMNS]
    return select.Relation(VIEW, names, [_t(t) for _, t in VIEW_COLUMNS], lambda _: iter(rows))


def _timestamp(wall_ns: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=wall_ns // 1000)


def _schemas_view(session: Session, txn: Transaction) -> select.Relation:
    privs = session.privileges(txn)
    rows: list[tuple[Any, ...]] = []
    for t in session.db.tables():
        try:
            check_any_table_privilege(privs, t)
        except PermissionDenied:
            continue
        rows.append((t.name, orjson.dumps(t.to_json()).decode()))
    return select.Relation(SCHEMAS_VIEW, ["path", "schema"], [_t("Utf8"), _t("Utf8")], lambda _: iter(rows))


select.SYSTEM_VIEWS[VIEW] = _replications_view
select.SYSTEM_VIEWS[SCHEMAS_VIEW] = _schemas_view


__all__ = [
    "FAMILY",
    "SCHEMAS_VIEW",
    "VIEW",
    "VIEW_COLUMNS",
    "alter_replication",
    "create_replication",
    "create_secret",
    "drop_replication",
    "drop_secret",
]
