"""Data definition: tables, keyspaces/databases, enums, and ``ALTER TABLE`` (column and option
actions; other families register further actions, e.g. YDB's ``ADD CHANGEFEED``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from changefeed.engine import replicas, schema_history
from changefeed.engine.catalog import CdcOptions, ColumnSchema, Role, TableSchema
from changefeed.engine.phoenix import phoenix_of
from changefeed.engine.phoenix_types import resolve_phoenix_type
from changefeed.engine.privileges import CREATEDB, DEFAULT_PRIVILEGES_TABLE, Privilege, check_role_option
from changefeed.engine.storage import TableStore
from changefeed.engine.txn import Transaction
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType, is_ydb_type
from changefeed.exceptions import (
    ChangefeedError,
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    NotNullViolation,
    UndefinedColumn,
    UndefinedObject,
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.sql import ast, astjson
from changefeed.sql.evaluator import Params
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import LOG_SUFFIX, enable_changes, jsonable

FAMILY = StatementFamily("ddl")

# CQL table options ScyllaDB accepts (values are stored, only ``cdc`` changes behaviour).
CQL_TABLE_OPTIONS = {
    "cdc", "comment", "compaction", "compression", "caching", "default_time_to_live",
    "gc_grace_seconds", "bloom_filter_fp_chance", "read_repair_chance", "dclocal_read_repair_chance",
    "speculative_retry", "memtable_flush_period_in_ms", "min_index_interval", "max_index_interval",
    "crc_check_chance", "tombstone_gc", "paxos_grace_seconds", "synchronous_updates", "tablets",
}  # fmt: skip
# YDB table options (``WITH (...)``); partition counts set the default topic partition count.
SQL_TABLE_OPTIONS = {
    "auto_partitioning_by_size", "auto_partitioning_by_load", "auto_partitioning_partition_size_mb",
    "auto_partitioning_min_partitions_count", "auto_partitioning_max_partitions_count",
    "uniform_partitions", "partition_at_keys", "key_bloom_filter", "read_replicas_settings",
    "ttl", "store", "cdc", "changes",
}  # fmt: skip


@FAMILY.statement(ast.CreateTable)
def create_table(session: Session, txn: Transaction, s: ast.CreateTable, ev: Params) -> Result:
    name = session.table_name(s.name)
    if session.dialect == "cql" and "." not in name:
        raise InvalidStatement(
            f"no keyspace has been specified for table {name}: USE a keyspace or qualify the name"
        )
    if name.endswith(LOG_SUFFIX):
        raise InvalidStatement(f"table names ending in {LOG_SUFFIX} are reserved for CDC logs")
    existing = session.db.find_table(name)
    if existing is not None and existing.name.lower() == name.lower():
        if s.if_not_exists:
            return Result(status="CREATE TABLE")
        raise DuplicateObject(f'table "{name}" already exists')
    if session.dialect == "cql":
        ks = name.rsplit(".", 1)[0]
        txn.conn.execute("INSERT OR IGNORE INTO _keyspaces VALUES (?, '{}')", (ks,))
    seen: set[str] = set()
    pk_inline = [c for c in s.columns if c.primary_key]
    if s.primary_key is not None and pk_inline:
        raise InvalidStatement("the primary key is declared twice (inline and as a table constraint)")
    if len(pk_inline) > 1:
        raise InvalidStatement("only one column may be declared PRIMARY KEY inline; use PRIMARY KEY (a, b)")
    if s.primary_key is not None:
        part = [session.ident(i) for i in s.primary_key.partition]
        clus = [session.ident(i) for i in s.primary_key.clustering]
    elif pk_inline:
        part, clus = [session.ident(pk_inline[0].name)], []
    else:
        raise InvalidStatement(f"table {name} must have a PRIMARY KEY")
    if session.dialect == "sql":
        part, clus = part + clus, []
    desc = {session.ident(o.column): o.descending for o in s.clustering_order}
    for o in desc:
        if o not in clus:
            raise InvalidStatement(f"CLUSTERING ORDER BY names {o}, which is not a clustering column")
    families = {session.ident(c): session.ident(f.name) for f in s.families for c in f.columns}
    columns: list[ColumnSchema] = []
    for i, cd in enumerate(s.columns):
        cname = session.ident(cd.name)
        if cname.lower() in seen:
            raise DuplicateObject(f'column "{cname}" is declared twice in table {name}')
        seen.add(cname.lower())
        t = resolve_type(
            cd.type.name, cd.type.params, cd.type.array, dialect=session.dialect, enums=session.db.enums
        )
        role = (
            Role.PARTITION
            if cname in part
            else Role.CLUSTERING
            if cname in clus
            else Role.STATIC
            if cd.static
            else Role.REGULAR
        )
        if cd.static and role is not Role.STATIC:
            raise InvalidStatement(f"static column {cname} cannot be part of the primary key")
        if cd.static and session.dialect != "cql":
            raise InvalidStatement("static columns exist only in CQL tables")
        default = astjson.to_json(cd.default) if cd.default is not None else None
        if default is not None:
            _check_default(session, cd.default, t, cname)  # type: ignore[arg-type]
        computed = astjson.to_json(cd.computed) if cd.computed is not None else None
        if (cd.computed is not None) and role in (Role.PARTITION, Role.CLUSTERING) and cd.virtual:
            raise InvalidStatement(f"virtual computed column {cname} cannot be part of the primary key")
        columns.append(
            ColumnSchema(
                id=i,
                name=cname,
                type=t,
                role=role,
                not_null=cd.not_null
                or (role in (Role.PARTITION, Role.CLUSTERING) and session.dialect == "sql" and False),
                default=default,
                computed=computed,
                virtual=cd.virtual,
                family=session.ident(cd.family) if cd.family else families.get(cname),
                descending=desc.get(cname, False),
            )
        )
    for k in part + clus:
        if k not in seen and k.lower() not in seen:
            raise UndefinedColumn(f'primary key column "{k}" is not a column of table {name}')
    # Order key columns as the PRIMARY KEY names them.
    order = {n: j for j, n in enumerate(part + clus)}
    by_name = {c.name: c for c in columns}
    keyed = [
        by_name[k] if k in by_name else next(c for c in columns if c.name.lower() == k.lower())
        for k in part + clus
    ]
    if any(c.type.kind in (Kind.ARRAY, Kind.JSON) for c in keyed):
        raise InvalidStatement("array and JSON columns cannot be part of a primary key")
    others = [c for c in columns if c.name not in order]
    columns = keyed + others
    if any(c.role is Role.STATIC for c in columns) and not clus:
        raise InvalidStatement("static columns are only allowed in tables with clustering columns")
    opts = _table_options(session, s.options, ev)
    cdc = CdcOptions.parse(opts.pop("cdc")) if "cdc" in opts else CdcOptions()
    # CockroachDB tables (not YDB-declared ones) keep their change history from creation
    # (gc.ttlseconds, engine/gc.py; TableSchema.crdb_history),
    # so a changefeed's cursor may reach back before the first changefeed; WITH (changes = false)
    # opts out (the writes then capture nothing until a changefeed exists).
    crdb = session.dialect == "sql" and not any(is_ydb_type(c.type) for c in columns)
    changes = bool(opts.pop("changes", crdb))
    if not changes and crdb:
        opts["changes"] = False  # the table opted out of history: dropping its last feed ends it
    partitions = int(
        opts.get("uniform_partitions") or opts.get("auto_partitioning_min_partitions_count") or 1
    )
    if partitions < 1:
        raise InvalidOption("a table needs at least one partition")
    schema = TableSchema(
        id=session.db.next_table_id(),
        name=name,
        dialect=session.dialect,
        columns=tuple(columns),
        cdc=cdc,
        changes=changes,
        partitions=partitions,
        options=jsonable(opts),
        next_column_id=len(columns),
    )
    for stmt in TableStore(schema).create_sql():
        txn.conn.execute(stmt)
    session.db.save_table(schema)
    if changes and txn.ts is not None:
        from changefeed.engine.gc import set_gc_threshold

        set_gc_threshold(txn.conn, schema, txn.ts)  # no history before the table: a cursor starts here
    initial_grants(session, txn, schema)
    return Result(status="CREATE TABLE")


def initial_grants(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """A new table starts with the default privileges (ALTER DEFAULT PRIVILEGES), and its creator,
    unless an admin, holds ALL on it (CockroachDB: the owner)."""
    admin = session.privileges(txn).admin
    txn.conn.execute(
        "INSERT OR IGNORE INTO _grants SELECT grantee, ?, privilege FROM _grants WHERE table_id = ?",
        (schema.id, DEFAULT_PRIVILEGES_TABLE),
    )
    if not admin:
        txn.conn.execute(
            "INSERT OR IGNORE INTO _grants VALUES (?, ?, ?)", (session.user, schema.id, Privilege.ALL.value)
        )
    session.db.bump_catalog()  # after the grants: privileges cached at the version before are stale


def _check_default(session: Session, e: ast.Expr, t: SqlType, cname: str) -> None:
    try:
        v = session.const(e, Params(()), EvalContext(0, session.dialect))
    except ChangefeedError as exc:
        raise InvalidStatement(f"invalid DEFAULT for column {cname}: {exc}") from None
    t.coerce(v, f"DEFAULT of column {cname}")


def _table_options(session: Session, options: Sequence[ast.Option], ev: Params) -> dict[str, Any]:
    allowed = CQL_TABLE_OPTIONS if session.dialect == "cql" else SQL_TABLE_OPTIONS
    out: dict[str, Any] = {}
    for key, expr in options:
        k = key.lower()
        if k not in allowed:
            raise InvalidOption(f'unknown table option "{key}"')
        out[k] = session.option_value(expr, ev)
    return out


@FAMILY.statement(ast.DropTable)
def drop_table(session: Session, txn: Transaction, s: ast.DropTable, ev: Params) -> Result:
    try:
        schema = session.resolve_table(txn, s.name)
    except UndefinedTable:
        if s.if_exists:
            return Result(status="DROP TABLE")
        raise
    session.require(txn, schema, Privilege.DROP)
    replicas.check_schema_change(schema)  # issue 20: a running replication's replica stays
    for hook in session.statements.drop_table_hooks:
        hook(session, txn, schema)
    for stmt in TableStore(schema).drop_sql():
        txn.conn.execute(stmt)
    session.db.delete_table(schema)
    return Result(status="DROP TABLE")


@FAMILY.statement(ast.AlterTable)
def alter_table(session: Session, txn: Transaction, s: ast.AlterTable, ev: Params) -> Result:
    schema = session.resolve_table(txn, s.name)
    replicas.check_schema_change(schema)  # issue 20: a replica's schema is its source's
    for action in s.actions:
        schema = _alter_one(session, txn, schema, action, ev)
    return Result(status="ALTER TABLE")


def _alter_one(
    session: Session, txn: Transaction, schema: TableSchema, action: ast.AlterAction, ev: Params
) -> TableSchema:
    st = TableStore(schema)
    if isinstance(action, ast.AddColumn | ast.DropColumn | ast.SetOptions):
        session.require(txn, schema, Privilege.CREATE)
    if isinstance(action, ast.AddColumn):
        cd = action.column
        # Apache Phoenix tables take Phoenix's names (upper-cased) and types (issue 11).
        phoenix_ddl = phoenix_of(schema).ddl
        cname = (
            (cd.name.name if cd.name.quoted else cd.name.name.upper())
            if phoenix_ddl
            else session.ident(cd.name)
        )
        existing = schema.find_column(cname)
        if existing is not None and existing.name.lower() == cname.lower():
            if action.if_not_exists:
                return schema
            raise DuplicateObject(f'column "{cname}" of table {schema.name} already exists')
        if cd.primary_key:
            raise InvalidStatement("cannot add a primary key column to an existing table")
        if cd.static and not schema.clustering_key:
            raise InvalidStatement("static columns are only allowed in tables with clustering columns")
        t = (
            resolve_phoenix_type(cd.type.name, cd.type.params, cd.type.array)
            if phoenix_ddl
            else resolve_type(
                cd.type.name, cd.type.params, cd.type.array, dialect=session.dialect, enums=session.db.enums
            )
        )
        if cd.default is not None:
            _check_default(session, cd.default, t, cname)
        if (
            cd.not_null
            and cd.default is None
            and txn.conn.execute(f"SELECT 1 FROM {st.t} LIMIT 1").fetchone()
        ):
            raise NotNullViolation(
                f"cannot add NOT NULL column {cname} without a DEFAULT to a table with rows"
            )
        col = ColumnSchema(
            id=schema.next_column_id,
            name=cname,
            type=t,
            role=Role.STATIC if cd.static else Role.REGULAR,
            not_null=cd.not_null,
            default=astjson.to_json(cd.default) if cd.default is not None else None,
            computed=astjson.to_json(cd.computed) if cd.computed is not None else None,
            virtual=cd.virtual,
            family=session.ident(cd.family) if cd.family else None,
        )
        if not col.virtual:
            target = st.s if col.role is Role.STATIC else st.t
            txn.conn.execute(f"ALTER TABLE {target} ADD COLUMN {col.db}")
            if schema.cdc.enabled:
                txn.conn.execute(f"ALTER TABLE {st.j} ADD COLUMN {col.db}")
                txn.conn.execute(f"ALTER TABLE {st.j} ADD COLUMN d{col.id} INTEGER")
            if schema.changes:
                txn.conn.execute(f"ALTER TABLE {st.x} ADD COLUMN {col.db}")
                txn.conn.execute(f"ALTER TABLE {st.x} ADD COLUMN u{col.id} INTEGER")
                txn.conn.execute(f"ALTER TABLE {st.x} ADD COLUMN o{col.id}")
            if cd.default is not None:
                ctx = EvalContext(txn.now_ns, session.dialect, txn.ts)
                value = t.to_db(t.coerce(session.const(cd.default, ev, ctx), f"DEFAULT of column {cname}"))
                txn.conn.execute(f"UPDATE {target} SET {col.db} = ?", (value,))
        new = replace(
            schema,
            columns=(*schema.columns, col),
            next_column_id=schema.next_column_id + 1,
            version=schema.version + 1,
        )
    elif isinstance(action, ast.DropColumn):
        cname = session.ident(action.name)
        found = schema.find_column(cname)
        if found is None:
            if action.if_exists:
                return schema
            raise UndefinedColumn(f'column "{cname}" does not exist in table {schema.name}')
        if found.is_key:
            raise InvalidStatement(f"cannot drop primary key column {found.name}")
        if not found.virtual:
            target = st.s if found.role is Role.STATIC else st.t
            txn.conn.execute(f"ALTER TABLE {target} DROP COLUMN {found.db}")
        new = replace(
            schema,
            columns=tuple(c for c in schema.columns if c.id != found.id),
            version=schema.version + 1,
        )
    elif isinstance(action, ast.SetOptions):
        opts = _table_options(session, action.options, ev)
        new = schema
        if "cdc" in opts:
            cdc_opts = opts.pop("cdc")
            cdc = CdcOptions.parse(cdc_opts, schema.cdc)
            if cdc.enabled and not schema.cdc.enabled:
                txn.conn.execute(
                    st.journal_create_sql().replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
                )
            new = replace(new, cdc=cdc)
        if "changes" in opts:
            enable_changes(session, txn, new, bool(opts.pop("changes")))
            new = replace(new, changes=bool(opts.get("changes", True)))
        new = replace(new, options={**new.options, **jsonable(opts)}, version=schema.version + 1)
    else:
        other = session.statements.alter_actions.get(type(action))
        if other is None:
            raise UnsupportedFeature(f"ALTER TABLE action {type(action).__name__} is not supported")
        return other(session, txn, schema, action, ev)
    # ---- CockroachDB changefeed jobs (issue 7): where the change stream's schema changed
    if schema.changes and txn.ts is not None and isinstance(action, ast.AddColumn | ast.DropColumn):
        schema_history.record(txn.conn, schema, new, txn.ts, txn.txid)
    session.db.save_table(new)
    session.db.refresh_catalog()
    return session.db.table_by_id(new.id)


@FAMILY.statement(ast.CreateKeyspace)
def create_keyspace(session: Session, txn: Transaction, s: ast.CreateKeyspace, ev: Params) -> Result:
    name = session.ident(s.name)
    if name in session.db.keyspaces:
        if s.if_not_exists:
            return Result(status="CREATE KEYSPACE")
        raise DuplicateObject(f"keyspace {name} already exists")
    check_role_option(session.privileges(txn), CREATEDB)
    txn.conn.execute("INSERT OR IGNORE INTO _keyspaces VALUES (?, '{}')", (name,))
    session.db.bump_catalog()
    return Result(status="CREATE KEYSPACE" if session.dialect == "cql" else "CREATE DATABASE")


@FAMILY.statement(ast.DropKeyspace)
def drop_keyspace(session: Session, txn: Transaction, s: ast.DropKeyspace, ev: Params) -> Result:
    name = session.ident(s.name)
    tables = [t for t in session.db.tables() if t.keyspace == name]
    if name not in session.db.keyspaces and not tables:
        if s.if_exists:
            return Result(status="DROP KEYSPACE")
        raise UndefinedObject(f"keyspace {name} does not exist")
    check_role_option(session.privileges(txn), CREATEDB)
    for t in tables:
        drop_table(
            session, txn, ast.DropTable(ast.QName(tuple(ast.Ident(p, True) for p in t.name.split(".")))), ev
        )
    txn.conn.execute("DELETE FROM _keyspaces WHERE name = ?", (name,))
    session.db.bump_catalog()
    return Result(status="DROP KEYSPACE")


@FAMILY.statement(ast.UseKeyspace, write=False)
def use_keyspace(session: Session, txn: Transaction, s: ast.UseKeyspace, ev: Params) -> Result:
    name = session.ident(s.name)
    if (
        session.dialect == "cql"
        and name not in session.db.keyspaces
        and not any(t.keyspace == name for t in session.db.tables())
    ):
        raise UndefinedObject(f"keyspace {name} does not exist")
    session.keyspace = name
    return Result(status="USE")


@FAMILY.statement(ast.CreateEnum)
def create_enum(session: Session, txn: Transaction, s: ast.CreateEnum, ev: Params) -> Result:
    name = session.table_name(s.name).lower()
    if name in session.db.enums:
        if s.if_not_exists:
            return Result(status="CREATE TYPE")
        raise DuplicateObject(f'type "{name}" already exists')
    if len(set(s.labels)) != len(s.labels):
        raise InvalidStatement("enum labels must be unique")
    txn.conn.execute("INSERT INTO _enums VALUES (?, ?)", (name, orjson.dumps(list(s.labels)).decode()))
    session.db.bump_catalog()
    return Result(status="CREATE TYPE")
