"""Run parsed statements against the engine, with the semantics of each dialect.

``cql`` (ScyllaDB/Cassandra): INSERT creates the row marker, UPDATE does not, a row without a live
marker vanishes with its last non-null regular cell, UPDATE is an upsert, ``DELETE c FROM`` sets
null, and row/range/partition deletes, static rows, batches and ``USING TTL``.

``sql`` (YDB YQL and CockroachDB): every row exists once written; INSERT fails on an existing key,
UPSERT writes the named columns, REPLACE the whole row, UPDATE/DELETE touch the rows their WHERE
selects; ``BEGIN``/``COMMIT``/``ROLLBACK``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from operator import itemgetter
from typing import Any

from changefeed.engine.catalog import CdcOptions, ColumnSchema, Role, TableSchema
from changefeed.engine.database import Database
from changefeed.engine.storage import OP_INSERT, OP_UPDATE, TableStore, stream_id, tokens
from changefeed.engine.txn import Bound, Transaction
from changefeed.engine.types import Kind, SqlType, resolve_type
from changefeed.exceptions import (
    ChangefeedError,
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    NotNullViolation,
    TransactionError,
    TypeMismatch,
    UndefinedColumn,
    UndefinedObject,
    UndefinedTable,
    UniqueViolation,
    UnsupportedFeature,
)
from changefeed.sql import ast, astjson
from changefeed.sql.functions import AGGREGATES, EvalContext, call

LOG_SUFFIX = "_scylla_cdc_log"

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


@dataclass
class Result:
    """What a statement returns: column names, rows of Python values, and a status tag."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    types: list[SqlType | None] = field(default_factory=list)
    status: str = ""
    rowcount: int = 0

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)


# ===================================================================================== relations


@dataclass
class Relation:
    """Something a SELECT reads: named, typed columns and rows of Python values."""

    name: str
    columns: list[str]
    types: list[SqlType | None]
    rows: Callable[[list[tuple[Any, ...]] | None], Iterable[tuple[Any, ...]]]
    #: Partition-key column names, for pushing ``pk = x`` / ``pk IN (...)`` down to storage.
    pk_columns: list[str] = field(default_factory=list)
    star: list[str] | None = None  # column order of ``SELECT *`` when it differs from ``columns``


def _bool_type() -> SqlType:
    return resolve_type("boolean", dialect="cql")


# ===================================================================================== session


class Session:
    """One client session: dialect, current keyspace, user, and the explicit transaction."""

    def __init__(self, db: Database, *, user: str = "root", dialect: str = "sql") -> None:
        if dialect not in ("sql", "cql"):
            raise InvalidOption(f"unknown dialect {dialect!r}; use 'sql' or 'cql'")
        self.db = db
        self.user = user
        self.dialect = dialect
        self.keyspace: str | None = None
        self.txn: Transaction | None = None
        self.aborted = False

    # ------------------------------------------------------------------ transactions
    @property
    def in_transaction(self) -> bool:
        return self.txn is not None

    def begin(self) -> None:
        if self.txn is not None:
            raise TransactionError("there is already a transaction in progress")
        self.txn = Transaction(self.db, write=True)
        self.aborted = False

    def commit(self) -> None:
        if self.txn is None:
            raise TransactionError("there is no transaction in progress")
        txn, self.txn = self.txn, None
        if self.aborted:
            self.aborted = False
            txn.rollback()
            raise TransactionError("the transaction was aborted by an earlier error and has been rolled back")
        txn.commit()

    def rollback(self) -> None:
        if self.txn is not None:
            txn, self.txn = self.txn, None
            txn.rollback()
        self.aborted = False

    def close(self) -> None:
        self.rollback()

    def _run(self, fn: Callable[[Transaction], Result], *, write: bool) -> Result:
        with self.db.lock:
            if self.txn is not None:
                if self.aborted:
                    raise TransactionError(
                        "current transaction is aborted, commands ignored until end of transaction block"
                    )
                try:
                    return fn(self.txn)
                except BaseException:
                    self.aborted = True
                    raise
            txn = Transaction(self.db, write=write)
            try:
                res = fn(txn)
            except BaseException:
                txn.rollback()
                raise
            if write:
                txn.commit()
            else:
                txn.rollback()
            return res

    # ------------------------------------------------------------------ dispatch
    def execute(self, stmt: ast.Statement, params: Sequence[Any] = ()) -> Result:
        ev = _Params(params)
        if isinstance(stmt, ast.Begin):
            self.begin()
            return Result(status="BEGIN")
        if isinstance(stmt, ast.Commit):
            self.commit()
            return Result(status="COMMIT")
        if isinstance(stmt, ast.Rollback):
            self.rollback()
            return Result(status="ROLLBACK")
        if isinstance(stmt, ast.Select):
            return self._run(lambda t: self._select(t, stmt, ev), write=False)
        if isinstance(stmt, ast.Show):
            return self._run(lambda t: self._show(t, stmt), write=False)
        if isinstance(stmt, ast.ShowChangefeedJob):
            from changefeed.feeds import job_statements

            return self._run(lambda t: job_statements.show_job(self, t, stmt, ev), write=False)
        if isinstance(stmt, ast.UseKeyspace):
            return self._run(lambda t: self._use(t, stmt), write=False)
        handler = _WRITE_HANDLERS.get(type(stmt))
        if handler is None:
            raise UnsupportedFeature(f"{type(stmt).__name__} statements are not supported yet")
        return self._run(lambda t: handler(self, t, stmt, ev), write=True)

    # ================================================================== bulk writes
    def execute_many(self, stmt: ast.Statement, param_rows: Iterable[Sequence[Any]]) -> int:
        """Run ``stmt`` once per parameter tuple in the current transaction; INSERT/UPSERT/REPLACE
        of bound values take a compiled bulk path, everything else runs row by row."""
        rows = list(param_rows)
        if (
            isinstance(stmt, ast.Insert)
            and len(stmt.rows) == 1
            and not stmt.if_not_exists
            and not stmt.returning
        ):
            plan = self._run(lambda t: Result(rows=[(self._insert_plan(t, stmt),)]), write=False).rows[0][0]
            if plan is not None:
                return self._run(lambda t: Result(rowcount=plan(t, rows)), write=True).rowcount
        total = 0
        for params in rows:
            total += self.execute(stmt, params).rowcount
        return total

    def _insert_plan(
        self, txn: Transaction, s: ast.Insert
    ) -> Callable[[Transaction, list[Sequence[Any]]], int] | None:
        """Compile a single-row INSERT of parameters/literals into a bulk writer, or None."""
        if not all(isinstance(v, ast.Param | ast.Literal) for v in s.rows[0]) or s.timestamp is not None:
            return None
        if s.ttl is not None and not isinstance(s.ttl, ast.Literal):
            return None
        schema = self.resolve_table(txn, s.table)
        cols = (
            [self.column(schema, i) for i in s.columns]
            if s.columns
            else [c for c in schema.columns if c.computed is None]
        )
        if len(cols) != len(s.rows[0]) or len({c.id for c in cols}) != len(cols):
            return None
        if any(c.role is Role.STATIC or c.computed is not None for c in cols):
            return None
        given = {c.id for c in cols}
        key_pos = []
        for k in schema.key:
            if k.id not in given:
                return None
            key_pos.append(next(i for i, c in enumerate(cols) if c.id == k.id))
        value_pos = [(i, c.id) for i, c in enumerate(cols) if not c.is_key]
        missing = [c for c in schema.stored_values if c.id not in given]
        if any(
            c.default is not None or c.not_null or c.computed is not None
            for c in missing + [c for c in schema.columns if c.virtual]
        ):
            return None
        if any(c.not_null for c in cols if not c.is_key):
            return None
        if (
            self.dialect == "cql"
            and any(c.role is Role.STATIC for c in schema.columns)
            and not schema.clustering_key
        ):
            return None
        fill = [c.id for c in missing] if (self.dialect == "sql" and s.mode == "replace") else []
        storers = [c.type.storer(f"column {c.name}") for c in cols]
        consts = [v.value if isinstance(v, ast.Literal) else None for v in s.rows[0]]
        params_at = [v.index if isinstance(v, ast.Param) else -1 for v in s.rows[0]]
        last_param = max(params_at)
        ttl = self._ttl(s.ttl, Evaluator(self, _Params(()), EvalContext(0, self.dialect)))
        mode, dialect, version = s.mode, self.dialect, schema.version

        def check_rows(rows: list[Sequence[Any]]) -> None:
            for params in rows:
                vals = [
                    store(params[pi] if pi >= 0 else const)
                    for store, pi, const in zip(storers, params_at, consts, strict=True)
                ]
                for i, c in zip(key_pos, schema.key, strict=True):
                    if vals[i] is None:
                        raise InvalidStatement(f"missing value for primary key column {c.name}")

        def run(t: Transaction, rows: list[Sequence[Any]]) -> int:
            current = t.db.table_by_id(schema.id)
            if current.version != version:
                raise InvalidStatement(f"table {schema.name} changed while the statement was prepared; retry")
            n = len(rows)
            if n == 0:
                return 0
            for params in rows:
                if len(params) <= last_param:
                    _Params(params).get(last_param)  # raises: a parameter has no value
            try:
                # Column-wise: each value column is checked and converted in one pass over the rows.
                vals = [
                    list(map(store, map(itemgetter(pi), rows))) if pi >= 0 else [store(const)] * n
                    for store, pi, const in zip(storers, params_at, consts, strict=True)
                ]
                for i, c in zip(key_pos, schema.key, strict=True):
                    if None in vals[i]:
                        raise InvalidStatement(f"missing value for primary key column {c.name}")
            except ChangefeedError:
                check_rows(rows)  # raises the error of the first bad row, as row by row would
                raise
            keys = list(zip(*(vals[i] for i in key_pos), strict=True))
            cells = {cid: vals[i] for i, cid in value_pos}
            for cid in fill:
                cells[cid] = [None] * n
            if len(set(keys)) != n:
                for params in rows:  # the same key twice: keep statement order, row by row
                    self._insert(t, s, _Params(params))
                return n
            olds = None
            if dialect == "sql" and mode == "insert":
                olds = t.store(current).get_rows(t.conn, keys, t.now_ns)
                if olds:
                    if not s.on_conflict_do_nothing:
                        k = next(iter(olds))
                        shown = ", ".join(c.name for c in current.key)
                        vals_shown = ", ".join(
                            str(c.type.from_db(v)) for c, v in zip(current.key, k, strict=True)
                        )
                        raise UniqueViolation(
                            f'duplicate key value violates unique constraint "primary": Key ({shown})=({vals_shown}) already exists'
                        )
                    keep = [r for r, k in enumerate(keys) if k not in olds]
                    keys = [keys[r] for r in keep]
                    cells = {cid: [col[r] for r in keep] for cid, col in cells.items()}
            t.write_rows(
                current,
                keys,
                cells,
                marker=True,
                op=OP_INSERT,
                ttl=ttl,
                # INSERT read the keys already: every key left has no row (no second read).
                olds={} if olds is not None else None,
            )
            return len(keys)

        return run

    # ================================================================== names
    def table_name(self, q: ast.QName) -> str:
        parts = [self._ident(p) for p in q.parts]
        if len(parts) == 1 and self.keyspace is not None:
            return f"{self.keyspace}.{parts[0]}"
        return ".".join(parts)

    def _ident(self, i: ast.Ident) -> str:
        if i.quoted:
            return i.name
        return i.name.lower() if self.dialect == "cql" else i.name

    def resolve_table(self, txn: Transaction, q: ast.QName) -> TableSchema:
        name = self.table_name(q)
        schema = self.db.find_table(name)
        if schema is None and len(q.parts) == 1 and self.keyspace is not None:
            schema = self.db.find_table(self._ident(q.parts[0]))
        if schema is None:
            if self.dialect == "cql" and len(q.parts) == 1 and self.keyspace is None:
                raise InvalidStatement(
                    f"no keyspace has been specified for table {name}: USE a keyspace or qualify the name"
                )
            raise UndefinedTable(f'table "{name}" does not exist')
        return schema

    def column(self, schema: TableSchema, ident: ast.Ident) -> ColumnSchema:
        name = self._ident(ident)
        col = (
            schema.find_column(name)
            if not ident.quoted
            else next((c for c in schema.columns if c.name == name), None)
        )
        if col is None:
            raise UndefinedColumn(f'column "{name}" does not exist in table {schema.name}')
        return col

    # ================================================================== DDL
    def _create_table(self, txn: Transaction, s: ast.CreateTable, ev: _Params) -> Result:
        name = self.table_name(s.name)
        if self.dialect == "cql" and "." not in name:
            raise InvalidStatement(
                f"no keyspace has been specified for table {name}: USE a keyspace or qualify the name"
            )
        if name.endswith(LOG_SUFFIX):
            raise InvalidStatement(f"table names ending in {LOG_SUFFIX} are reserved for CDC logs")
        existing = self.db.find_table(name)
        if existing is not None and existing.name.lower() == name.lower():
            if s.if_not_exists:
                return Result(status="CREATE TABLE")
            raise DuplicateObject(f'table "{name}" already exists')
        if self.dialect == "cql":
            ks = name.rsplit(".", 1)[0]
            txn.conn.execute("INSERT OR IGNORE INTO _keyspaces VALUES (?, '{}')", (ks,))
        seen: set[str] = set()
        pk_inline = [c for c in s.columns if c.primary_key]
        if s.primary_key is not None and pk_inline:
            raise InvalidStatement("the primary key is declared twice (inline and as a table constraint)")
        if len(pk_inline) > 1:
            raise InvalidStatement(
                "only one column may be declared PRIMARY KEY inline; use PRIMARY KEY (a, b)"
            )
        if s.primary_key is not None:
            part = [self._ident(i) for i in s.primary_key.partition]
            clus = [self._ident(i) for i in s.primary_key.clustering]
        elif pk_inline:
            part, clus = [self._ident(pk_inline[0].name)], []
        else:
            raise InvalidStatement(f"table {name} must have a PRIMARY KEY")
        if self.dialect == "sql":
            part, clus = part + clus, []
        desc = {self._ident(o.column): o.descending for o in s.clustering_order}
        for o in desc:
            if o not in clus:
                raise InvalidStatement(f"CLUSTERING ORDER BY names {o}, which is not a clustering column")
        families = {self._ident(c): self._ident(f.name) for f in s.families for c in f.columns}
        columns: list[ColumnSchema] = []
        for i, cd in enumerate(s.columns):
            cname = self._ident(cd.name)
            if cname.lower() in seen:
                raise DuplicateObject(f'column "{cname}" is declared twice in table {name}')
            seen.add(cname.lower())
            t = resolve_type(
                cd.type.name, cd.type.params, cd.type.array, dialect=self.dialect, enums=self.db.enums
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
            if cd.static and self.dialect != "cql":
                raise InvalidStatement("static columns exist only in CQL tables")
            default = astjson.to_json(cd.default) if cd.default is not None else None
            if default is not None:
                self._check_default(cd.default, t, cname)  # type: ignore[arg-type]
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
                    or (role in (Role.PARTITION, Role.CLUSTERING) and self.dialect == "sql" and False),
                    default=default,
                    computed=computed,
                    virtual=cd.virtual,
                    family=self._ident(cd.family) if cd.family else families.get(cname),
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
        opts = self._table_options(s.options, ev)
        cdc = CdcOptions.parse(opts.pop("cdc")) if "cdc" in opts else CdcOptions()
        changes = bool(opts.pop("changes", False))
        partitions = int(
            opts.get("uniform_partitions") or opts.get("auto_partitioning_min_partitions_count") or 1
        )
        if partitions < 1:
            raise InvalidOption("a table needs at least one partition")
        schema = TableSchema(
            id=self.db.next_table_id(),
            name=name,
            dialect=self.dialect,
            columns=tuple(columns),
            cdc=cdc,
            changes=changes,
            partitions=partitions,
            options=_jsonable(opts),
            next_column_id=len(columns),
        )
        for stmt in TableStore(schema).create_sql():
            txn.conn.execute(stmt)
        self.db.save_table(schema)
        return Result(status="CREATE TABLE")

    def _check_default(self, e: ast.Expr, t: SqlType, cname: str) -> None:
        try:
            v = self._const(e, _Params(()), EvalContext(0, self.dialect))
        except ChangefeedError as exc:
            raise InvalidStatement(f"invalid DEFAULT for column {cname}: {exc}") from None
        t.coerce(v, f"DEFAULT of column {cname}")

    def _table_options(self, options: Sequence[ast.Option], ev: _Params) -> dict[str, Any]:
        allowed = CQL_TABLE_OPTIONS if self.dialect == "cql" else SQL_TABLE_OPTIONS
        out: dict[str, Any] = {}
        for key, expr in options:
            k = key.lower()
            if k not in allowed:
                raise InvalidOption(f"unknown table option {key!r}")
            out[k] = self._option_value(expr, ev)
        return out

    def _option_value(self, expr: ast.Expr | None, ev: _Params) -> Any:
        if expr is None:
            return True
        if isinstance(expr, ast.MapLit):
            return {str(self._option_value(k, ev)): self._option_value(v, ev) for k, v in expr.items}
        if isinstance(expr, ast.Column):
            return expr.name.name
        return self._const(expr, ev, EvalContext(self.db.clock.now_ns(), self.dialect))

    def _drop_table(self, txn: Transaction, s: ast.DropTable, ev: _Params) -> Result:
        try:
            schema = self.resolve_table(txn, s.name)
        except UndefinedTable:
            if s.if_exists:
                return Result(status="DROP TABLE")
            raise
        from changefeed.feeds import hooks

        hooks.on_drop_table(self, txn, schema)
        for stmt in TableStore(schema).drop_sql():
            txn.conn.execute(stmt)
        self.db.delete_table(schema)
        return Result(status="DROP TABLE")

    def _alter_table(self, txn: Transaction, s: ast.AlterTable, ev: _Params) -> Result:
        schema = self.resolve_table(txn, s.name)
        for action in s.actions:
            schema = self._alter_one(txn, schema, action, ev)
        return Result(status="ALTER TABLE")

    def _alter_one(
        self, txn: Transaction, schema: TableSchema, action: ast.AlterAction, ev: _Params
    ) -> TableSchema:
        st = TableStore(schema)
        if isinstance(action, ast.AddColumn):
            cd = action.column
            cname = self._ident(cd.name)
            existing = schema.find_column(cname)
            if existing is not None and existing.name.lower() == cname.lower():
                if action.if_not_exists:
                    return schema
                raise DuplicateObject(f'column "{cname}" of table {schema.name} already exists')
            if cd.primary_key:
                raise InvalidStatement("cannot add a primary key column to an existing table")
            if cd.static and not schema.clustering_key:
                raise InvalidStatement("static columns are only allowed in tables with clustering columns")
            t = resolve_type(
                cd.type.name, cd.type.params, cd.type.array, dialect=self.dialect, enums=self.db.enums
            )
            if cd.default is not None:
                self._check_default(cd.default, t, cname)
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
                family=self._ident(cd.family) if cd.family else None,
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
                    ctx = EvalContext(txn.now_ns, self.dialect, txn.ts)
                    value = t.to_db(t.coerce(self._const(cd.default, ev, ctx), f"DEFAULT of column {cname}"))
                    txn.conn.execute(f"UPDATE {target} SET {col.db} = ?", (value,))
            new = replace(
                schema,
                columns=(*schema.columns, col),
                next_column_id=schema.next_column_id + 1,
                version=schema.version + 1,
            )
        elif isinstance(action, ast.DropColumn):
            cname = self._ident(action.name)
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
            opts = self._table_options(action.options, ev)
            new = schema
            if "cdc" in opts:
                cdc_opts = opts.pop("cdc")
                if not isinstance(cdc_opts, dict):
                    raise InvalidOption("the cdc option takes a map, e.g. {'enabled': true}")
                cdc = CdcOptions.parse(cdc_opts, schema.cdc)
                if cdc.enabled and not schema.cdc.enabled:
                    txn.conn.execute(
                        st.journal_create_sql().replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
                    )
                new = replace(new, cdc=cdc)
            if "changes" in opts:
                self.enable_changes(txn, new, bool(opts.pop("changes")))
                new = replace(new, changes=bool(opts.get("changes", True)))
            new = replace(new, options={**new.options, **_jsonable(opts)}, version=schema.version + 1)
        elif isinstance(action, ast.AddChangefeed | ast.DropChangefeed):
            from changefeed.feeds import hooks

            return hooks.alter_changefeed(self, txn, schema, action, ev)
        elif isinstance(action, ast.ConfigureZone):
            from changefeed.engine.gc import configure_zone

            zone = configure_zone(schema, [(k, self._option_value(v, ev)) for k, v in action.options])
            new = replace(schema, options={**schema.options, **zone}, version=schema.version + 1)
        else:  # pragma: no cover
            raise UnsupportedFeature(f"ALTER TABLE action {type(action).__name__}")
        self.db.save_table(new)
        self.db.refresh_catalog()
        return self.db.table_by_id(new.id)

    def enable_changes(self, txn: Transaction, schema: TableSchema, on: bool) -> TableSchema:
        """Turn the change stream ``x<id>`` on (creating it) or off; returns the new schema."""
        if on and not schema.changes:
            txn.conn.execute(
                TableStore(schema)
                .changes_create_sql()
                .replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
            )
        new = replace(schema, changes=on, version=schema.version + 1)
        self.db.save_table(new)
        self.db.refresh_catalog()
        return self.db.table_by_id(new.id)

    def _create_keyspace(self, txn: Transaction, s: ast.CreateKeyspace, ev: _Params) -> Result:
        name = self._ident(s.name)
        if name in self.db.keyspaces:
            if s.if_not_exists:
                return Result(status="CREATE KEYSPACE")
            raise DuplicateObject(f"keyspace {name} already exists")
        txn.conn.execute("INSERT OR IGNORE INTO _keyspaces VALUES (?, '{}')", (name,))
        self.db.bump_catalog()
        return Result(status="CREATE KEYSPACE" if self.dialect == "cql" else "CREATE DATABASE")

    def _drop_keyspace(self, txn: Transaction, s: ast.DropKeyspace, ev: _Params) -> Result:
        name = self._ident(s.name)
        tables = [t for t in self.db.tables() if t.keyspace == name]
        if name not in self.db.keyspaces and not tables:
            if s.if_exists:
                return Result(status="DROP KEYSPACE")
            raise UndefinedObject(f"keyspace {name} does not exist")
        for t in tables:
            self._drop_table(
                txn, ast.DropTable(ast.QName(tuple(ast.Ident(p, True) for p in t.name.split(".")))), ev
            )
        txn.conn.execute("DELETE FROM _keyspaces WHERE name = ?", (name,))
        self.db.bump_catalog()
        return Result(status="DROP KEYSPACE")

    def _use(self, txn: Transaction, s: ast.UseKeyspace) -> Result:
        name = self._ident(s.name)
        if (
            self.dialect == "cql"
            and name not in self.db.keyspaces
            and not any(t.keyspace == name for t in self.db.tables())
        ):
            raise UndefinedObject(f"keyspace {name} does not exist")
        self.keyspace = name
        return Result(status="USE")

    def _create_enum(self, txn: Transaction, s: ast.CreateEnum, ev: _Params) -> Result:
        name = self.table_name(s.name).lower()
        if name in self.db.enums:
            if s.if_not_exists:
                return Result(status="CREATE TYPE")
            raise DuplicateObject(f'type "{name}" already exists')
        if len(set(s.labels)) != len(s.labels):
            raise InvalidStatement("enum labels must be unique")
        import orjson

        txn.conn.execute("INSERT INTO _enums VALUES (?, ?)", (name, orjson.dumps(list(s.labels)).decode()))
        self.db.bump_catalog()
        return Result(status="CREATE TYPE")

    def _create_user(self, txn: Transaction, s: ast.CreateUser, ev: _Params) -> Result:
        name = self._ident(s.name)
        if txn.conn.execute("SELECT 1 FROM _users WHERE name = ?", (name,)).fetchone():
            if s.if_not_exists:
                return Result(status="CREATE ROLE")
            raise DuplicateObject(f'role "{name}" already exists')
        import orjson

        from changefeed.engine.auth import password_option

        opts = {k.lower(): self._option_value(v, ev) for k, v in s.options}
        if "password" in opts:
            opts["password"] = password_option(opts["password"])
        txn.conn.execute("INSERT INTO _users VALUES (?, ?)", (name, orjson.dumps(_jsonable(opts)).decode()))
        return Result(status="CREATE ROLE")

    def _grant(self, txn: Transaction, s: ast.Grant, ev: _Params) -> Result:
        tables = [self.resolve_table(txn, q) for q in s.tables] if s.tables else []
        ids = [t.id for t in tables] or [0]  # table id 0: default privileges for tables created later
        for g in s.grantees:
            grantee = self._ident(g)
            for tid in ids:
                for p in s.privileges:
                    priv = p.upper()
                    if s.revoke:
                        txn.conn.execute(
                            "DELETE FROM _grants WHERE grantee = ? AND table_id = ? AND privilege = ?",
                            (grantee, tid, priv),
                        )
                    else:
                        txn.conn.execute(
                            "INSERT OR IGNORE INTO _grants VALUES (?, ?, ?)", (grantee, tid, priv)
                        )
        return Result(status="REVOKE" if s.revoke else "GRANT")

    def _changefeed_stmt(self, txn: Transaction, s: ast.CreateChangefeed, ev: _Params) -> Result:
        from changefeed.feeds import hooks

        return hooks.create_changefeed(self, txn, s, ev)

    # ================================================================== values
    def _const(self, e: ast.Expr, ev: _Params, ctx: EvalContext) -> Any:
        return Evaluator(self, ev, ctx).eval(e, None)

    def _coerce(self, col: ColumnSchema, value: Any) -> Any:
        """Python value -> storage value for ``col``, with the column named in errors."""
        v = col.type.coerce(value, f"column {col.name}")
        return col.type.to_db(v)

    def _default(self, col: ColumnSchema, ev: _Params, ctx: EvalContext) -> Any:
        if col.default is None:
            return None
        return self._coerce(col, self._const(astjson.from_json(col.default), ev, ctx))

    # ================================================================== INSERT / UPSERT / REPLACE
    def _insert(self, txn: Transaction, s: ast.Insert, ev: _Params) -> Result:
        schema = self.resolve_table(txn, s.table)
        if s.columns:
            cols = [self.column(schema, i) for i in s.columns]
        else:
            cols = [c for c in schema.columns if c.computed is None]
        if len({c.id for c in cols}) != len(cols):
            raise InvalidStatement("a column is named more than once in the column list")
        for c in cols:
            if c.computed is not None:
                raise InvalidStatement(f"cannot write to computed column {c.name}")
        ctx = EvalContext(txn.now_ns, self.dialect, txn.ts)
        evaluator = Evaluator(self, ev, ctx)
        ttl = self._ttl(s.ttl, evaluator)
        applied_rows: list[tuple[Any, ...]] = []
        n = 0
        for values in s.rows:
            if len(values) != len(cols):
                raise InvalidStatement(f"INSERT has {len(values)} values for {len(cols)} columns")
            given = {
                c.id: self._coerce(c, evaluator.eval(v, None)) for c, v in zip(cols, values, strict=True)
            }
            if self.dialect == "cql":
                applied = self._cql_insert(txn, schema, given, ttl, s.if_not_exists)
                if s.if_not_exists:
                    applied_rows.append((applied,))
            else:
                n += self._sql_insert(txn, schema, given, s, ev, ctx)
        if s.if_not_exists and self.dialect == "cql":
            return Result(columns=["[applied]"], rows=applied_rows[-1:], types=[_bool_type()])
        tag = {"insert": "INSERT", "upsert": "UPSERT", "replace": "REPLACE"}[s.mode]
        return Result(
            status=f"{tag} {n if self.dialect == 'sql' else len(s.rows)}", rowcount=n or len(s.rows)
        )

    def _key_of(
        self, schema: TableSchema, values: Mapping[int, Any], *, partial: bool = False
    ) -> tuple[Any, ...]:
        key = []
        for c in schema.key:
            if c.id not in values or values[c.id] is None:
                if partial and c.role is Role.CLUSTERING:
                    break
                raise InvalidStatement(f"missing value for primary key column {c.name}")
            key.append(values[c.id])
        return tuple(key)

    def _cql_insert(
        self,
        txn: Transaction,
        schema: TableSchema,
        given: dict[int, Any],
        ttl: int | None,
        if_not_exists: bool,
    ) -> bool:
        pk = tuple(given.get(c.id) for c in schema.partition_key)
        if any(v is None for v in pk):
            missing = [c.name for c in schema.partition_key if given.get(c.id) is None]
            raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing[0]}")
        statics = {i: v for i, v in given.items() if schema.column_by_id(i).role is Role.STATIC}
        regular = {i: v for i, v in given.items() if schema.column_by_id(i).role is Role.REGULAR}
        ck_given = [c for c in schema.clustering_key if given.get(c.id) is not None]
        st = txn.store(schema)
        if not ck_given and schema.clustering_key:
            if regular or not statics:
                raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {schema.clustering_key[0].name}")
            if if_not_exists and st.get_static(txn.conn, pk, txn.now_ns) is not None:
                return False
            txn.write_static(schema, pk, statics, ttl=ttl)
            return True
        if len(ck_given) != len(schema.clustering_key):
            missing = [c.name for c in schema.clustering_key if given.get(c.id) is None]
            raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing[0]}")
        key = self._key_of(schema, given)
        if if_not_exists and st.get_row(txn.conn, key, txn.now_ns) is not None:
            return False
        if statics:
            txn.write_static(schema, pk, statics, ttl=ttl)
        txn.write_row(schema, key, regular, marker=True, op=OP_INSERT, ttl=ttl)
        return True

    def _sql_insert(
        self,
        txn: Transaction,
        schema: TableSchema,
        given: dict[int, Any],
        s: ast.Insert,
        ev: _Params,
        ctx: EvalContext,
    ) -> int:
        st = txn.store(schema)
        # Key columns not given take their DEFAULT (e.g. unique_rowid()).
        for c in schema.key:
            if c.id not in given:
                given[c.id] = self._default(c, ev, ctx)
        key = self._key_of(schema, given)
        old = st.get_row(txn.conn, key, txn.now_ns)
        if s.mode == "insert" and old is not None:
            if s.on_conflict_do_nothing:
                return 0
            shown = ", ".join(f"{c.name}" for c in schema.key)
            vals = ", ".join(str(schema.column_by_id(c.id).type.from_db(given[c.id])) for c in schema.key)
            raise UniqueViolation(
                f'duplicate key value violates unique constraint "primary": Key ({shown})=({vals}) already exists'
            )
        # The cells the statement writes: what it names; REPLACE also every other column (its
        # DEFAULT or NULL); a new row also the columns that have a DEFAULT. Columns left out of a
        # new row are NULL without being "written", so UPDATES-mode feeds list only real writes.
        cells: dict[int, Any] = {}
        for c in schema.stored_values:
            if c.id in given:
                cells[c.id] = given[c.id]
            elif c.computed is None and (
                s.mode == "replace" or (c.default is not None and (old is None or s.mode == "insert"))
            ):
                cells[c.id] = self._default(c, ev, ctx)
        cells = self._with_computed(schema, key, cells, old, ev, ctx)
        self._check_not_null(schema, {**(old or {}), **cells} if s.mode == "upsert" else cells)
        txn.write_row(schema, key, cells, marker=True, op=OP_INSERT, old=old)
        return 1

    def _with_computed(
        self,
        schema: TableSchema,
        key: tuple[Any, ...],
        cells: dict[int, Any],
        old: Mapping[int, Any] | None,
        ev: _Params,
        ctx: EvalContext,
    ) -> dict[int, Any]:
        computed = [c for c in schema.columns if c.computed is not None and not c.virtual]
        if not computed:
            return cells
        row = {**(old or {}), **dict(zip((c.id for c in schema.key), key, strict=True)), **cells}
        scope = {c.name: c.type.from_db(row.get(c.id)) for c in schema.columns if not c.virtual}
        evaluator = Evaluator(self, ev, ctx)
        out = dict(cells)
        for c in computed:
            out[c.id] = self._coerce(c, evaluator.eval(astjson.from_json(c.computed), _Scope(scope)))
        return out

    def _check_not_null(self, schema: TableSchema, cells: Mapping[int, Any]) -> None:
        for c in schema.columns:
            if c.not_null and not c.is_key and c.id in cells and cells[c.id] is None:
                raise NotNullViolation(f'null value in column "{c.name}" violates not-null constraint')
        for c in schema.columns:
            if c.not_null and not c.is_key and not c.virtual and c.id not in cells:
                raise NotNullViolation(f'null value in column "{c.name}" violates not-null constraint')

    def _ttl(self, expr: ast.Expr | None, evaluator: Evaluator) -> int | None:
        if expr is None:
            return None
        v = evaluator.eval(expr, None)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 630_720_000:
            raise InvalidStatement(f"TTL must be a number of seconds between 0 and 630720000, not {v!r}")
        return v or None

    # ================================================================== UPDATE
    def _update(self, txn: Transaction, s: ast.Update, ev: _Params) -> Result:
        schema = self.resolve_table(txn, s.table)
        ctx = EvalContext(txn.now_ns, self.dialect, txn.ts)
        evaluator = Evaluator(self, ev, ctx)
        assigns = [(self.column(schema, i), e) for i, e in s.assignments]
        for c, _ in assigns:
            if c.is_key:
                raise InvalidStatement(f"cannot update primary key column {c.name}")
            if c.computed is not None:
                raise InvalidStatement(f"cannot write to computed column {c.name}")
        if self.dialect == "cql":
            return self._cql_update(txn, schema, assigns, s, evaluator)
        # Every row is computed from the statement's snapshot first, then written in bulk: a
        # failing row (a NOT NULL, a bad value) stops the statement before anything is written.
        groups: dict[tuple[int, ...], tuple[list[tuple[Any, ...]], list[dict[int, Any]]]] = {}
        olds: dict[tuple[Any, ...], dict[int, Any]] = {}
        for key, row in list(self._matching_rows(txn, schema, s.where, evaluator)):
            scope = _Scope(self._py_row(schema, row))
            cells = {c.id: self._coerce(c, evaluator.eval(e, scope)) for c, e in assigns}
            cells = self._with_computed(schema, key, cells, row, ev, ctx)
            self._check_not_null(schema, {**row, **cells})
            keys, values = groups.setdefault(tuple(cells), ([], []))
            keys.append(key)
            values.append(cells)
            olds[key] = row
        for ids, (keys, values) in groups.items():
            columns = {i: [v[i] for v in values] for i in ids}
            txn.write_rows(schema, keys, columns, marker=True, op=OP_UPDATE, olds=olds)
        n = len(olds)
        return Result(status=f"UPDATE {n}", rowcount=n)

    def _cql_update(
        self,
        txn: Transaction,
        schema: TableSchema,
        assigns: list[tuple[ColumnSchema, ast.Expr]],
        s: ast.Update,
        evaluator: Evaluator,
    ) -> Result:
        target = self._cql_where(schema, s.where, evaluator)
        ttl = self._ttl(s.ttl, evaluator)
        statics: dict[int, Any] = {}
        regular: dict[int, Any] = {}
        for c, e in assigns:
            v = self._coerce(c, evaluator.eval(e, None))
            (statics if c.role is Role.STATIC else regular)[c.id] = v
        st = txn.store(schema)
        if regular and (target.range is not None or len(target.prefix_cols) < len(schema.clustering_key)):
            missing = schema.clustering_key[len(target.prefix_cols)] if target.range is None else target.range
            raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing.name}")
        applied = True
        for pk in target.partitions:
            if statics:
                if s.if_exists and st.get_static(txn.conn, pk, txn.now_ns) is None and not regular:
                    applied = False
                    continue
                txn.write_static(schema, pk, statics, ttl=ttl)
            if regular:
                for prefix in target.prefixes:
                    key = pk + prefix
                    if s.if_exists and st.get_row(txn.conn, key, txn.now_ns) is None:
                        applied = False
                        continue
                    txn.write_row(schema, key, regular, marker=False, op=OP_UPDATE, ttl=ttl)
        if s.if_exists:
            return Result(columns=["[applied]"], rows=[(applied,)], types=[_bool_type()])
        return Result(status="UPDATE")

    # ================================================================== DELETE
    def _delete(self, txn: Transaction, s: ast.Delete, ev: _Params) -> Result:
        schema = self.resolve_table(txn, s.table)
        ctx = EvalContext(txn.now_ns, self.dialect, txn.ts)
        evaluator = Evaluator(self, ev, ctx)
        if self.dialect == "cql":
            return self._cql_delete(txn, schema, s, evaluator)
        if s.columns:
            raise InvalidStatement("DELETE of individual columns is CQL; use UPDATE .. SET c = NULL")
        olds = dict(self._matching_rows(txn, schema, s.where, evaluator))
        txn.delete_rows(schema, list(olds), olds=olds)
        return Result(status=f"DELETE {len(olds)}", rowcount=len(olds))

    def _cql_delete(
        self, txn: Transaction, schema: TableSchema, s: ast.Delete, evaluator: Evaluator
    ) -> Result:
        target = self._cql_where(schema, s.where, evaluator)
        st = txn.store(schema)
        if s.columns:
            cols = [self.column(schema, i) for i in s.columns]
            for c in cols:
                if c.is_key:
                    raise InvalidStatement(
                        f"invalid identifier {c.name} for deletion (should not be a PRIMARY KEY part)"
                    )
            statics = {c.id: None for c in cols if c.role is Role.STATIC}
            regular = {c.id: None for c in cols if c.role is Role.REGULAR}
            if regular and (target.range is not None or len(target.prefix_cols) < len(schema.clustering_key)):
                raise InvalidStatement("column deletions need the full primary key")
            for pk in target.partitions:
                if statics:
                    txn.write_static(schema, pk, statics)
                for prefix in target.prefixes if regular else ():
                    txn.write_row(schema, pk + prefix, regular, marker=False, op=OP_UPDATE)
            return Result(status="DELETE")
        full = target.range is None and len(target.prefix_cols) == len(schema.clustering_key)
        for pk in target.partitions:
            if not schema.clustering_key:
                txn.delete_row(schema, pk)
            elif full:
                for prefix in target.prefixes:
                    if s.if_exists and st.get_row(txn.conn, pk + prefix, txn.now_ns) is None:
                        return Result(columns=["[applied]"], rows=[(False,)], types=[_bool_type()])
                    txn.delete_row(schema, pk + prefix)
            elif not target.prefix_cols and target.range is None:
                txn.delete_partition(schema, pk)
            else:
                for prefix in target.prefixes:
                    txn.delete_range(schema, pk, prefix, target.lower, target.upper)
        if s.if_exists:
            return Result(columns=["[applied]"], rows=[(True,)], types=[_bool_type()])
        return Result(status="DELETE")

    # ------------------------------------------------------------------ CQL WHERE analysis
    def _cql_where(self, schema: TableSchema, where: ast.Expr | None, evaluator: Evaluator) -> _CqlTarget:
        """Split a CQL WHERE into partitions, a clustering prefix and an optional range."""
        if where is None:
            raise InvalidStatement("a WHERE clause restricting the partition key is required")
        eq: dict[int, list[Any]] = {}
        lower: tuple[ColumnSchema, Bound] | None = None
        upper: tuple[ColumnSchema, Bound] | None = None
        for rel in _conjuncts(where):
            if isinstance(rel, ast.InList) and isinstance(rel.expr, ast.Column) and not rel.negated:
                c = self.column(schema, rel.expr.name)
                vals = [self._coerce(c, evaluator.eval(x, None)) for x in rel.items]
                self._restrict(eq, c, vals)
                continue
            if not isinstance(rel, ast.BinaryOp) or rel.op not in ("=", "<", "<=", ">", ">="):
                raise InvalidStatement("only =, IN, <, <=, >, >= relations joined by AND are supported here")
            left, right, op = rel.left, rel.right, rel.op
            if not isinstance(left, ast.Column) and isinstance(right, ast.Column):
                left, right = right, left
                op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]  # type: ignore[assignment]
            if not isinstance(left, ast.Column):
                raise InvalidStatement("a WHERE relation must compare a column with a value")
            c = self.column(schema, left.name)
            v = self._coerce(c, evaluator.eval(right, None))
            if v is None:
                raise InvalidStatement(f"invalid null value in condition for column {c.name}")
            if op == "=":
                self._restrict(eq, c, [v])
            else:
                if c.role is not Role.CLUSTERING:
                    raise InvalidStatement(
                        f"only clustering key columns can be restricted by a range, not {c.name}"
                    )
                b = Bound(v, op in ("<=", ">="))
                if op in (">", ">="):
                    if lower is not None:
                        raise InvalidStatement(f"more than one lower bound on {c.name}")
                    lower = (c, b)
                else:
                    if upper is not None:
                        raise InvalidStatement(f"more than one upper bound on {c.name}")
                    upper = (c, b)
        for c in schema.columns:
            if c.id in eq and not c.is_key:
                raise InvalidStatement(f"non-primary-key column {c.name} cannot be restricted here")
        for c in schema.partition_key:
            if c.id not in eq:
                raise InvalidStatement(f"partition key column {c.name} must be restricted by = or IN")
        prefix_cols: list[ColumnSchema] = []
        for c in schema.clustering_key:
            if c.id in eq:
                prefix_cols.append(c)
            else:
                break
        if any(c.id in eq for c in schema.clustering_key[len(prefix_cols) :]):
            gap = schema.clustering_key[len(prefix_cols)]
            raise InvalidStatement(
                f"PRIMARY KEY column {gap.name} cannot be skipped: it must be restricted because a later column is"
            )
        range_col = None
        for side in (lower, upper):
            if side is not None:
                if (
                    len(prefix_cols) >= len(schema.clustering_key)
                    or side[0].id != schema.clustering_key[len(prefix_cols)].id
                ):
                    raise InvalidStatement(
                        f"clustering column {side[0].name} can only be ranged after equality on every clustering column before it"
                    )
                range_col = side[0]
        # IN lists name each partition and prefix once, however often a value repeats.
        partitions = list(dict.fromkeys(itertools.product(*(eq[c.id] for c in schema.partition_key))))
        prefixes = list(dict.fromkeys(itertools.product(*(eq[c.id] for c in prefix_cols))))
        return _CqlTarget(
            partitions=partitions,
            prefix_cols=prefix_cols,
            prefixes=prefixes,
            range=range_col,
            lower=lower[1] if lower else None,
            upper=upper[1] if upper else None,
        )

    @staticmethod
    def _restrict(eq: dict[int, list[Any]], c: ColumnSchema, vals: list[Any]) -> None:
        if c.id in eq:
            raise InvalidStatement(f"column {c.name} is restricted more than once")
        eq[c.id] = vals

    # ------------------------------------------------------------------ SQL row matching
    def _matching_rows(
        self, txn: Transaction, schema: TableSchema, where: ast.Expr | None, evaluator: Evaluator
    ) -> Iterator[tuple[tuple[Any, ...], dict[int, Any]]]:
        st = txn.store(schema)
        point = self._point_keys(schema, where, evaluator)
        rows: Iterable[dict[int, Any]]
        if point is not None:
            rows = (r for r in (st.get_row(txn.conn, k, txn.now_ns) for k in point) if r is not None)
        else:
            rows = st.scan_rows(txn.conn, txn.now_ns)
        for row in rows:
            if where is not None and evaluator.eval(where, _Scope(self._py_row(schema, row))) is not True:
                continue
            yield tuple(row[c.id] for c in schema.key), row

    def _point_keys(
        self, schema: TableSchema, where: ast.Expr | None, evaluator: Evaluator
    ) -> list[tuple[Any, ...]] | None:
        """The full primary keys the WHERE pins down, or None when it does not pin every key column."""
        return self._key_values(schema.key, where, evaluator)

    def _key_values(
        self, cols: Sequence[ColumnSchema], where: ast.Expr | None, evaluator: Evaluator
    ) -> list[tuple[Any, ...]] | None:
        """Every combination of storage values that the ``col = v`` / ``col IN (...)`` conjuncts of
        ``where`` allow for ``cols``; None when a column is unrestricted (or a value cannot be its
        type). Callers still evaluate the whole WHERE on the rows they read."""
        if where is None:
            return None
        wanted = {c.name.lower(): c for c in cols}
        eq: dict[int, list[Any]] = {}
        for rel in _conjuncts(where):
            col: ast.Expr | None = None
            items: tuple[ast.Expr, ...] = ()
            if isinstance(rel, ast.BinaryOp) and rel.op == "=":
                col, val = (
                    (rel.left, rel.right) if isinstance(rel.left, ast.Column) else (rel.right, rel.left)
                )
                items = (val,)
            elif isinstance(rel, ast.InList) and not rel.negated:
                col, items = rel.expr, rel.items
            if not isinstance(col, ast.Column) or not all(_is_const(x) for x in items):
                continue
            c = wanted.get(self._ident(col.name).lower())
            if c is None or c.id in eq:
                continue
            try:
                eq[c.id] = [self._coerce(c, evaluator.eval(x, None)) for x in items]
            except TypeMismatch:
                return None
        if not all(c.id in eq for c in cols):
            return None
        return list(dict.fromkeys(tuple(p) for p in itertools.product(*(eq[c.id] for c in cols))))

    def _py_row(self, schema: TableSchema, row: Mapping[int, Any]) -> dict[str, Any]:
        out = {c.name: c.type.from_db(row.get(c.id)) for c in schema.columns if not c.virtual}
        for c in schema.columns:
            if c.virtual and c.computed is not None:
                try:
                    out[c.name] = c.type.coerce(
                        Evaluator(self, _Params(()), EvalContext(0, self.dialect)).eval(
                            astjson.from_json(c.computed), _Scope(out)
                        )
                    )
                except ChangefeedError:
                    out[c.name] = None
        return out

    # ================================================================== BATCH
    def _batch(self, txn: Transaction, s: ast.Batch, ev: _Params) -> Result:
        for stmt in s.statements:
            handler = _WRITE_HANDLERS[type(stmt)]
            handler(self, txn, stmt, ev)
        return Result(status="BATCH")

    # ================================================================== SELECT
    def relation(self, txn: Transaction, q: ast.QName) -> Relation:
        name = self.table_name(q)
        if name.endswith(LOG_SUFFIX) and self.db.find_table(name) is None:
            base_q = ast.QName(
                (*q.parts[:-1], ast.Ident(q.parts[-1].name[: -len(LOG_SUFFIX)], q.parts[-1].quoted))
            )
            try:
                base = self.resolve_table(txn, base_q)
            except UndefinedTable:
                raise UndefinedTable(f'table "{name}" does not exist') from None
            if not base.cdc.enabled:
                raise UndefinedTable(f'table "{name}" does not exist (CDC is not enabled on {base.name})')
            return self._log_relation(txn, base)
        return self._table_relation(txn, self.resolve_table(txn, q))

    def _table_relation(self, txn: Transaction, schema: TableSchema) -> Relation:
        st = txn.store(schema)
        cols = list(schema.columns)
        names = [c.name for c in cols]
        if schema.is_cql:
            star = (
                [c.name for c in schema.key]
                + sorted(c.name for c in schema.statics)
                + sorted(c.name for c in schema.regulars)
            )
        else:
            star = names

        def rows(pks: list[tuple[Any, ...]] | None) -> Iterator[tuple[Any, ...]]:
            parts: list[tuple[Any, ...] | None] = list(pks) if pks is not None else [None]
            for pk in parts:
                for row in self._merged_rows(txn, schema, st, pk):
                    py = self._py_row(schema, row)
                    yield tuple(py.get(n) for n in names)

        return Relation(
            schema.name, names, [c.type for c in cols], rows, [c.name for c in schema.partition_key], star
        )

    def _merged_rows(
        self, txn: Transaction, schema: TableSchema, st: TableStore, pk: tuple[Any, ...] | None
    ) -> Iterator[dict[int, Any]]:
        """Clustering rows with their partition's static row mixed in, as CQL shows them."""
        if not st.static_cols:
            yield from st.scan_rows(txn.conn, txn.now_ns, pk)
            return
        statics = {tuple(r[c.id] for c in st.pk_cols): r for r in st.scan_statics(txn.conn, txn.now_ns, pk)}
        emitted: set[tuple[Any, ...]] = set()
        pending = [(token(k), k) for k in statics]
        pending.sort()
        pi = 0
        for row in st.scan_rows(txn.conn, txn.now_ns, pk):
            k = tuple(row[c.id] for c in st.pk_cols)
            tok = token(k)
            while pi < len(pending) and pending[pi][0] < tok:
                if pending[pi][1] not in emitted:
                    yield dict(statics[pending[pi][1]])
                    emitted.add(pending[pi][1])
                pi += 1
            s = statics.get(k)
            emitted.add(k)
            yield {**row, **s} if s else row
        for _, k in pending[pi:]:
            if k not in emitted:
                yield dict(statics[k])

    def _log_relation(self, txn: Transaction, base: TableSchema) -> Relation:
        st = txn.store(base)
        cols = [c for c in base.columns if not c.virtual]
        value_cols = [c for c in cols if not c.is_key]

        def t(n: str) -> SqlType:
            return resolve_type(n, dialect="cql")

        names = [
            "cdc$stream_id",
            "cdc$time",
            "cdc$batch_seq_no",
            "cdc$end_of_batch",
            "cdc$operation",
            "cdc$ttl",
        ]
        types: list[SqlType | None] = [
            t("blob"),
            t("timeuuid"),
            t("int"),
            t("boolean"),
            t("tinyint"),
            t("bigint"),
        ]
        names += [c.name for c in cols] + [f"cdc$deleted_{c.name}" for c in value_cols]
        types += [c.type for c in cols] + [t("boolean") for _ in value_cols]
        select = ", ".join(
            ["tok", "ts", "lg", "tx", "bsn", "op", "ttl"]
            + [c.db for c in cols]
            + [f"d{c.id}" for c in value_cols]
        )
        pk_at = [7 + cols.index(c) for c in st.pk_cols]

        def rows(pks: list[tuple[Any, ...]] | None) -> Iterator[tuple[Any, ...]]:
            from changefeed.engine.clock import CommitTs

            # ScyllaDB's log order: stream, then time, then batch_seq_no (a bulk write stores a
            # partition's entries in batch_seq_no order only per kind: pre-images first).
            if st.cql:
                raw = txn.conn.execute(
                    f"SELECT {select} FROM {st.j} ORDER BY tok, ts, lg, bsn, seq"
                ).fetchall()
            else:
                # SQL tables store no token: compute it from the partition key, then order alike.
                logged = txn.conn.execute(f"SELECT {select} FROM {st.j} ORDER BY ts, lg, bsn, seq").fetchall()
                toks = tokens(tuple(r[i] for i in pk_at) for r in logged)
                order = sorted(range(len(logged)), key=lambda i: toks[i])  # stable
                raw = [(toks[i], *logged[i][1:]) for i in order]
            for i, r in enumerate(raw):
                tok, wall, lg, tx, bsn, op, ttl = r[:7]
                nxt = raw[i + 1] if i + 1 < len(raw) else None
                end = True if nxt is None or nxt[0] != tok or nxt[3] != tx else None
                vals = [c.type.from_db(v) for c, v in zip(cols, r[7 : 7 + len(cols)], strict=True)]
                dels = [True if d else None for d in r[7 + len(cols) :]]
                yield (stream_id(tok), CommitTs(wall, lg).timeuuid(), bsn, end, op, ttl, *vals, *dels)

        return Relation(base.name + LOG_SUFFIX, names, types, rows, [])

    def _select(self, txn: Transaction, s: ast.Select, ev: _Params) -> Result:
        if s.as_of is not None:
            raise UnsupportedFeature(
                "AS OF SYSTEM TIME is not supported: the store keeps no MVCC history of base tables"
            )
        ctx = EvalContext(txn.now_ns, self.dialect, txn.ts)
        evaluator = Evaluator(self, ev, ctx)
        rel = Relation("", [], [], lambda _: iter([()])) if s.table is None else self.relation(txn, s.table)
        pks = self._pushdown(rel, s.where, evaluator)
        index = {n: i for i, n in enumerate(rel.columns)}
        lower_index: dict[str, int] = {}
        for n, i in index.items():
            lower_index.setdefault(n.lower(), i)

        def scope(row: tuple[Any, ...]) -> _Scope:
            return _Scope(_RowMap(row, index, lower_index))

        rows = [r for r in rel.rows(pks) if s.where is None or evaluator.eval(s.where, scope(r)) is True]
        # Expand the select list.
        items: list[tuple[str, ast.Expr, SqlType | None]] = []
        for it in s.items:
            if isinstance(it.expr, ast.Star):
                for n in rel.star or rel.columns:
                    items.append((n, ast.Column(ast.Ident(n, True)), rel.types[index[n]]))
            else:
                items.append((self._label(it), it.expr, self._expr_type(it.expr, rel, index)))
        aggregate = any(_has_aggregate(e) for _, e, _ in items)
        if aggregate:
            out_rows = [tuple(evaluator.eval_aggregate(e, [scope(r) for r in rows]) for _, e, _ in items)]
        else:
            if s.order_by:
                for o in reversed(s.order_by):

                    def sort_key(r: tuple[Any, ...], expr: ast.Expr = o.expr) -> tuple[int, Any]:
                        return _sort_key(evaluator.eval(expr, scope(r)))

                    rows.sort(key=sort_key, reverse=o.descending)
            out_rows = [tuple(evaluator.eval(e, scope(r)) for _, e, _ in items) for r in rows]
            if s.distinct:
                out_rows = list(dict.fromkeys(out_rows))
        if s.limit is not None:
            lim = evaluator.eval(s.limit, None)
            if not isinstance(lim, int) or lim < 0:
                raise InvalidStatement(f"LIMIT must be a non-negative integer, not {lim!r}")
            out_rows = out_rows[:lim]
        return Result(
            columns=[n for n, _, _ in items],
            rows=out_rows,
            types=[t for _, _, t in items],
            status=f"SELECT {len(out_rows)}",
            rowcount=len(out_rows),
        )

    def _label(self, it: ast.SelectItem) -> str:
        if it.alias is not None:
            return self._ident(it.alias)
        e = it.expr
        if isinstance(e, ast.Column):
            return self._ident(e.name)
        if isinstance(e, ast.FuncCall):
            return e.name.lower() if self.dialect == "cql" or e.name.lower() in AGGREGATES else e.name
        if isinstance(e, ast.Cast):
            return e.type.name.lower()
        return "?column?"

    def _expr_type(self, e: ast.Expr, rel: Relation, index: Mapping[str, int]) -> SqlType | None:
        if isinstance(e, ast.Column):
            name = self._ident(e.name)
            i = index.get(name)
            if i is None:
                for n, j in index.items():
                    if n.lower() == name.lower():
                        i = j
                        break
            return rel.types[i] if i is not None else None
        if isinstance(e, ast.FuncCall) and e.name.lower() == "count":
            return resolve_type("bigint", dialect="cql")
        return None

    def _pushdown(
        self, rel: Relation, where: ast.Expr | None, evaluator: Evaluator
    ) -> list[tuple[Any, ...]] | None:
        """The partitions a SELECT's WHERE pins down (None: scan them all)."""
        if where is None or not rel.pk_columns:
            return None
        schema = self.db.find_table(rel.name)
        return None if schema is None else self._key_values(schema.partition_key, where, evaluator)

    def _show(self, txn: Transaction, s: ast.Show) -> Result:
        if s.what == "tables":
            names = [t.name for t in self.db.tables()]
            return Result(
                columns=["table_name"], rows=[(n,) for n in names], types=[None], status=f"SHOW {len(names)}"
            )
        if s.what in ("create table", "columns") and s.name is not None:
            schema = self.resolve_table(txn, s.name)
            if s.what == "columns":
                rows = [
                    (c.name, c.type.name, not c.not_null and not c.is_key, c.role.value)
                    for c in schema.columns
                ]
                return Result(
                    columns=["column_name", "data_type", "is_nullable", "kind"], rows=rows, types=[None] * 4
                )
            return Result(
                columns=["table_name", "create_statement"],
                rows=[(schema.name, describe(schema))],
                types=[None, None],
            )
        if s.what in ("changefeed jobs", "jobs"):
            from changefeed.feeds import job_statements

            if s.what == "jobs":
                return job_statements.show_all_jobs(self, txn)
            return job_statements.show_jobs(self, txn)
        if s.what == "changefeeds":
            from changefeed.feeds import hooks

            return hooks.show_feeds(self, txn)
        raise UnsupportedFeature(f"SHOW {s.what.upper()} is not supported")


def describe(schema: TableSchema) -> str:
    cols = []
    for c in schema.columns:
        extra = " static" if c.role is Role.STATIC else ""
        cols.append(f"    {c.name} {c.type.name}{extra}")
    if schema.is_cql:
        part = ", ".join(c.name for c in schema.partition_key)
        part = f"({part})" if len(schema.partition_key) > 1 else part
        key = ", ".join([part] + [c.name for c in schema.clustering_key])
    else:
        key = ", ".join(c.name for c in schema.key)
    body = ",\n".join([*cols, f"    PRIMARY KEY ({key})"])
    text = f"CREATE TABLE {schema.name} (\n{body}\n)"
    if schema.cdc.enabled:
        text += f" WITH cdc = {{'enabled': 'true', 'preimage': '{schema.cdc.preimage}', 'postimage': '{str(schema.cdc.postimage).lower()}', 'delta': '{schema.cdc.delta}', 'ttl': '{schema.cdc.ttl}'}}"
    return text + ";"


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out[k] = _jsonable(v)
        elif isinstance(v, bool | int | float | str) or v is None:
            out[k] = v
        else:
            out[k] = str(v)
    return out


@dataclass
class _CqlTarget:
    partitions: list[tuple[Any, ...]]
    prefix_cols: list[ColumnSchema]
    prefixes: list[tuple[Any, ...]]
    range: ColumnSchema | None
    lower: Bound | None
    upper: Bound | None


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.BinaryOp) and e.op == "AND":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _is_const(e: ast.Expr) -> bool:
    if isinstance(e, ast.Literal | ast.Param):
        return True
    if isinstance(e, ast.FuncCall):
        return e.name.lower() not in AGGREGATES and all(_is_const(a) for a in e.args)
    if isinstance(e, ast.UnaryOp):
        return _is_const(e.operand)
    if isinstance(e, ast.Cast):
        return _is_const(e.expr)
    if isinstance(e, ast.BinaryOp):
        return _is_const(e.left) and _is_const(e.right)
    if isinstance(e, ast.ArrayLit | ast.TupleLit):
        return all(_is_const(x) for x in e.items)
    return False


def _has_aggregate(e: ast.Expr) -> bool:
    if isinstance(e, ast.FuncCall):
        return e.name.lower() in AGGREGATES or any(_has_aggregate(a) for a in e.args)
    if isinstance(e, ast.BinaryOp):
        return _has_aggregate(e.left) or _has_aggregate(e.right)
    if isinstance(e, ast.UnaryOp | ast.Cast):
        return _has_aggregate(e.operand if isinstance(e, ast.UnaryOp) else e.expr)
    return False


def _sort_key(v: Any) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, uuid.UUID):
        return (1, str(v))
    return (1, v)


# ===================================================================================== evaluation


class _Params:
    def __init__(self, values: Sequence[Any]) -> None:
        self.values = list(values)

    def get(self, i: int) -> Any:
        if i >= len(self.values):
            raise InvalidStatement(f"bind parameter {i + 1} has no value ({len(self.values)} given)")
        return self.values[i]


class _RowMap(Mapping[str, Any]):
    __slots__ = ("index", "lower", "row")

    def __init__(self, row: tuple[Any, ...], index: Mapping[str, int], lower: Mapping[str, int]) -> None:
        self.row, self.index, self.lower = row, index, lower

    def __getitem__(self, k: str) -> Any:
        return self.row[self.index[k]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class _Scope:
    """Column values visible to an expression."""

    __slots__ = ("values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values

    def lookup(self, name: str, quoted: bool) -> tuple[bool, Any]:
        v = self.values
        if name in v:
            return True, v[name]
        if isinstance(v, _RowMap):
            i = v.lower.get(name.lower())
            return (True, v.row[i]) if i is not None else (False, None)
        lowered = name.lower()
        for k, x in v.items():
            if k.lower() == lowered:
                return True, x
        return False, None


class Evaluator:
    """Evaluates expressions over Python values with SQL three-valued logic."""

    def __init__(self, session: Session, params: _Params, ctx: EvalContext) -> None:
        self.session = session
        self.params = params
        self.ctx = ctx

    def eval(self, e: ast.Expr, scope: _Scope | None) -> Any:
        if isinstance(e, ast.Literal):
            return e.value
        if isinstance(e, ast.Column):
            name = self.session._ident(e.name)
            if scope is not None:
                found, v = scope.lookup(name, e.name.quoted)
                if found:
                    return v
            if e.name.quoted and self.session.dialect == "sql":
                return e.name.name  # YQL: "text" is a string literal
            raise UndefinedColumn(f'column "{name}" does not exist')
        if isinstance(e, ast.Param):
            return self.params.get(e.index)
        if isinstance(e, ast.BinaryOp):
            return self._binary(e, scope)
        if isinstance(e, ast.UnaryOp):
            v = self.eval(e.operand, scope)
            if e.op == "NOT":
                return None if v is None else not _truth(v)
            if v is None:
                return None
            if not isinstance(v, int | float | Decimal) or isinstance(v, bool):
                raise TypeMismatch(f"unary {e.op} needs a number, not {v!r}")
            return -v if e.op == "-" else v
        if isinstance(e, ast.IsNull):
            v = self.eval(e.expr, scope)
            return (v is not None) if e.negated else (v is None)
        if isinstance(e, ast.InList):
            v = self.eval(e.expr, scope)
            if v is None:
                return None
            items = [self.eval(x, scope) for x in e.items]
            hit = any(_eq(v, x) for x in items if x is not None)
            if not hit and any(x is None for x in items):
                return None
            return (not hit) if e.negated else hit
        if isinstance(e, ast.Between):
            v, lo, hi = (self.eval(x, scope) for x in (e.expr, e.low, e.high))
            if v is None or lo is None or hi is None:
                return None
            r = _cmp(lo, v) <= 0 <= _cmp(hi, v)
            return (not r) if e.negated else r
        if isinstance(e, ast.FuncCall):
            if e.name.lower() in AGGREGATES:
                raise InvalidStatement(f"aggregate {e.name}() is not allowed here")
            if e.name.lower() == "token" and scope is not None:
                from changefeed.engine.storage import token as tok

                return tok([self.eval(a, scope) for a in e.args])
            return call(
                e.name, [self.eval(a, scope) for a in e.args if not isinstance(a, ast.Star)], self.ctx
            )
        if isinstance(e, ast.Cast):
            v = self.eval(e.expr, scope)
            t = resolve_type(
                e.type.name,
                e.type.params,
                e.type.array,
                dialect=self.session.dialect,
                enums=self.session.db.enums,
            )
            if t.kind is Kind.TEXT and v is not None and not isinstance(v, str):
                return _to_text(v)
            return t.coerce(v, "CAST")
        if isinstance(e, ast.ArrayLit):
            return [self.eval(x, scope) for x in e.items]
        if isinstance(e, ast.TupleLit):
            return tuple(self.eval(x, scope) for x in e.items)
        if isinstance(e, ast.MapLit):
            return {self.eval(k, scope): self.eval(v, scope) for k, v in e.items}
        if isinstance(e, ast.Star):
            raise InvalidStatement("* is not allowed here")
        raise UnsupportedFeature(f"expression {type(e).__name__}")

    def _binary(self, e: ast.BinaryOp, scope: _Scope | None) -> Any:
        op = e.op
        if op == "AND":
            left = self.eval(e.left, scope)
            if left is not None and not _truth(left):
                return False
            right = self.eval(e.right, scope)
            if right is not None and not _truth(right):
                return False
            return None if left is None or right is None else True
        if op == "OR":
            left = self.eval(e.left, scope)
            if left is not None and _truth(left):
                return True
            right = self.eval(e.right, scope)
            if right is not None and _truth(right):
                return True
            return None if left is None or right is None else False
        a, b = self.eval(e.left, scope), self.eval(e.right, scope)
        if a is None or b is None:
            return None
        if op in ("=", "!=", "<", "<=", ">", ">="):
            c = _cmp(a, b)
            return {"=": c == 0, "!=": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]
        if op == "||":
            return _to_text(a) + _to_text(b)
        try:
            if isinstance(a, Decimal) or isinstance(b, Decimal):
                a, b = _dec(a), _dec(b)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                if b == 0:
                    raise InvalidStatement("division by zero")
                return a // b if isinstance(a, int) and isinstance(b, int) else a / b
            if op == "%":
                if b == 0:
                    raise InvalidStatement("division by zero")
                return a % b
        except TypeError:
            raise TypeMismatch(f"unsupported operands for {op}: {a!r} and {b!r}") from None
        raise UnsupportedFeature(f"operator {op}")

    def eval_aggregate(self, e: ast.Expr, scopes: list[_Scope]) -> Any:
        if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
            name = e.name.lower()
            if name == "count":
                if not e.args or isinstance(e.args[0], ast.Star):
                    return len(scopes)
                return sum(1 for s in scopes if self.eval(e.args[0], s) is not None)
            vals = [v for v in (self.eval(e.args[0], s) for s in scopes) if v is not None]
            if not vals:
                return None
            if name == "min":
                return min(vals)
            if name == "max":
                return max(vals)
            if name == "sum":
                return sum(vals)
            return sum(vals) / len(vals)
        return self.eval(e, scopes[0] if scopes else None)


def _truth(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    raise TypeMismatch(f"expected a boolean condition, got {v!r}")


def _dec(v: Any) -> Any:
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v) if isinstance(v, int) else v


def _eq(a: Any, b: Any) -> bool:
    try:
        return _cmp(a, b) == 0
    except TypeMismatch:
        return False


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, bool) != isinstance(b, bool):
        raise TypeMismatch(f"cannot compare {a!r} with {b!r}")
    if isinstance(a, str) and not isinstance(b, str):
        b, a = a, b
        return -_cmp(a, b)
    if isinstance(b, str) and not isinstance(a, str):
        b = _coerce_like(a, b)
    if isinstance(a, uuid.UUID) and isinstance(b, uuid.UUID):
        a, b = str(a), str(b)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    try:
        return (a > b) - (a < b)  # type: ignore[no-any-return]
    except TypeError:
        raise TypeMismatch(f"cannot compare {a!r} with {b!r}") from None


def _coerce_like(a: Any, s: str) -> Any:
    """Compare a string literal with a typed value the way SQL casts the literal."""
    try:
        if isinstance(a, bool):
            return s.lower() in ("true", "t")
        if isinstance(a, int):
            return int(s)
        if isinstance(a, float):
            return float(s)
        if isinstance(a, Decimal):
            return Decimal(s)
        if isinstance(a, dt.datetime):
            from changefeed.engine.types import parse_timestamp

            return parse_timestamp(s)
        if isinstance(a, dt.date):
            return dt.date.fromisoformat(s)
        if isinstance(a, uuid.UUID):
            return uuid.UUID(s)
        if isinstance(a, dt.timedelta):
            from changefeed.engine.types import parse_interval

            return parse_interval(s)
    except ValueError:
        raise TypeMismatch(f"cannot compare {a!r} with {s!r}") from None
    return s


def _to_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


from changefeed.engine.storage import token  # noqa: E402

_WRITE_HANDLERS: dict[type[Any], Callable[[Session, Transaction, Any, _Params], Result]] = {
    ast.CreateTable: Session._create_table,
    ast.DropTable: Session._drop_table,
    ast.AlterTable: Session._alter_table,
    ast.CreateKeyspace: Session._create_keyspace,
    ast.DropKeyspace: Session._drop_keyspace,
    ast.CreateEnum: Session._create_enum,
    ast.CreateUser: Session._create_user,
    ast.Grant: Session._grant,
    ast.Insert: Session._insert,
    ast.Update: Session._update,
    ast.Delete: Session._delete,
    ast.Batch: Session._batch,
    ast.CreateChangefeed: Session._changefeed_stmt,
    # CockroachDB changefeed jobs (changefeed.feeds.job_statements)
    ast.JobControl: lambda s, t, stmt, ev: _job_statements().job_control(s, t, stmt, ev),
    ast.AlterChangefeed: lambda s, t, stmt, ev: _job_statements().alter_job(s, t, stmt, ev),
}


def _job_statements() -> Any:
    from changefeed.feeds import job_statements

    return job_statements
