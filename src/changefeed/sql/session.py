"""One client session, and the seam between it and the statement families.

A :class:`Session` holds what a client connection has: the dialect, the current keyspace, the
user, and the explicit transaction. It runs transaction control itself and hands every other
statement to the handler registered for its AST node type. Handlers live in statement families
(``changefeed.sql.statements.*``); each family is one :class:`StatementFamily` registry that its
module fills with decorators, and ``changefeed.sql.statements`` merges them into the one table a
session dispatches through. A session also offers the name resolution and value helpers every
family shares.

The dialects: ``cql`` (ScyllaDB/Cassandra) and ``sql`` (YDB YQL and CockroachDB).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.database import Database
from changefeed.engine.privileges import Privilege, UserPrivileges, check_table_privileges, effective
from changefeed.engine.txn import Transaction
from changefeed.exceptions import (
    ActiveTransaction,
    ChangefeedError,
    InvalidOption,
    InvalidSavepoint,
    InvalidStatement,
    NoActiveTransaction,
    QueryCanceled,
    ReadOnlyTransaction,
    TransactionError,
    UndefinedColumn,
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.sql import ast, astjson
from changefeed.sql.evaluator import Evaluator, Params, Scope
from changefeed.sql.function_errors import arithmetic_error
from changefeed.sql.functions import EvalContext
from changefeed.sql.param_columns import ParamColumns
from changefeed.sql.result import Result

# ===================================================================================== the seam

#: Runs one statement inside ``txn`` (the session's explicit transaction or its own).
Run = Callable[["Session", Transaction, Any, Params], Result]
#: Compiles a statement for many parameter tuples: a writer of all the rows, or None (row by row).
BulkWriter = Callable[[Transaction, Sequence[Sequence[Any]]], int]
Plan = Callable[["Session", Transaction, Any], BulkWriter | None]
#: Runs a compiled statement for one parameter tuple (see :data:`PlanOne`).
Planned = Callable[[Transaction, Sequence[Any]], Result]
#: Compiles a statement to run again and again with new parameters (no parse, resolution,
#: privilege check or column mapping per run), or None (it runs as any statement). The plan is
#: kept per session for the catalog version (which every DDL, GRANT and REVOKE moves) and the
#: keyspace it was made under.
PlanOne = Callable[["Session", Transaction, Any], Planned | None]
#: Compiled plans a session keeps (beyond: the one used longest ago is dropped).
PLANS_KEPT = 256
#: ``SHOW <what>``.
ShowRun = Callable[["Session", Transaction, ast.Show], Result]
#: One ALTER TABLE action: returns the table's new schema.
AlterRun = Callable[["Session", Transaction, TableSchema, Any, Params], TableSchema]
#: Called inside DROP TABLE, before the table's storage goes.
DropHook = Callable[["Session", Transaction, TableSchema], None]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Handler:
    run: Run
    #: Whether the statement writes (its own transaction commits) or only reads (rolls back).
    write: bool
    family: str
    plan_many: Plan | None = None
    plan_one: PlanOne | None = None


@dataclass
class StatementFamily:
    """The statements one family handles, keyed by AST node type, plus the SHOW targets, ALTER
    TABLE actions and DROP TABLE hooks it contributes. :meth:`merge` joins families into the
    table a session dispatches through; a node type claimed twice is an error at import."""

    name: str
    statements: dict[type[Any], Handler] = field(default_factory=dict)
    shows: dict[str, ShowRun] = field(default_factory=dict)
    alter_actions: dict[type[Any], AlterRun] = field(default_factory=dict)
    drop_table_hooks: list[DropHook] = field(default_factory=list)

    def statement(
        self,
        *nodes: type[Any],
        write: bool = True,
        plan_many: Plan | None = None,
        plan_one: PlanOne | None = None,
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for node in nodes:
                _claim(self.statements, node, Handler(fn, write, self.name, plan_many, plan_one), self.name)
            return fn

        return register

    def show(self, *what: str) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for w in what:
                _claim(self.shows, w, fn, self.name)
            return fn

        return register

    def alter_action(self, *nodes: type[Any]) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for node in nodes:
                _claim(self.alter_actions, node, fn, self.name)
            return fn

        return register

    def on_drop_table(self, fn: F) -> F:
        self.drop_table_hooks.append(fn)
        return fn

    @classmethod
    def merge(cls, name: str, families: Iterable[StatementFamily]) -> StatementFamily:
        out = cls(name)
        for f in families:
            for node, h in f.statements.items():
                _claim(out.statements, node, h, f.name)
            for w, s in f.shows.items():
                _claim(out.shows, w, s, f.name)
            for node, a in f.alter_actions.items():
                _claim(out.alter_actions, node, a, f.name)
            out.drop_table_hooks.extend(f.drop_table_hooks)
        return out

    def handler(self, stmt: object) -> Handler:
        h = self.statements.get(type(stmt))
        if h is None:
            raise UnsupportedFeature(f"{type(stmt).__name__} statements are not supported yet")
        return h


class RunAgain(Exception):
    """Raised by a statement that waits for work other sessions or the pipeline do (CockroachDB's
    ``SHOW JOBS WHEN COMPLETE``): the session rolls the statement's transaction back, lets go of
    the database for ``delay`` seconds and runs the statement again; after ``timeout`` seconds it
    raises ``timeout_error`` instead. It never leaves :meth:`Session.execute`."""

    def __init__(self, delay: float, timeout: float, timeout_error: ChangefeedError) -> None:
        super().__init__("run again")
        self.delay = delay
        self.timeout = timeout
        self.timeout_error = timeout_error


class RowMark:
    """Names the parameter row of a bulk statement that a ``ChangefeedError`` raised inside is
    about (its ``row``, unless an inner one set it already). One handler around a whole loop over
    the rows, which moves the mark as it goes: ``with RowMark() as at: for at.r, params in
    enumerate(rows): ...``."""

    __slots__ = ("r",)

    def __init__(self, r: int = 0) -> None:
        self.r = r

    def __enter__(self) -> RowMark:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, ChangefeedError) and exc.row is None:
            exc.row = self.r


def _claim(table: dict[Any, Any], key: Any, value: Any, family: str) -> None:
    if key in table and table[key] is not value:
        name = key.__name__ if isinstance(key, type) else repr(key)
        raise TypeError(f"{name} is claimed by two statement families (the second is {family})")
    table[key] = value


# ===================================================================================== session


class Session:
    """One client session: dialect, current keyspace, user, and the explicit transaction."""

    def __init__(
        self, db: Database, statements: StatementFamily, *, user: str = "root", dialect: str = "sql"
    ) -> None:
        if dialect not in ("sql", "cql"):
            raise InvalidOption(f"unknown dialect {dialect!r}; use 'sql' or 'cql'")
        self.db = db
        self.statements = statements
        self.user = user
        self.dialect = dialect
        self.keyspace: str | None = None
        self.txn: Transaction | None = None
        #: An explicit transaction was begun and has run no statement yet (see :meth:`begin`).
        self.opened = False
        self.aborted = False
        #: The explicit transaction is ``READ ONLY`` (``BEGIN READ ONLY``): writes are 25006.
        self.read_only = False
        #: Transactions are read only unless they say otherwise (PostgreSQL's
        #: ``default_transaction_read_only``, ``SET SESSION CHARACTERISTICS``; JDBC's
        #: ``setReadOnly``): autocommit writes are refused too.
        self.default_read_only = False
        #: Set to cancel a statement that is waiting (:class:`RunAgain`); the PostgreSQL endpoint
        #: shares its connection's cancel event here.
        self.cancelled = threading.Event()
        #: id(statement) -> (the statement, what its plan was made under, the plan or None).
        self._plans: OrderedDict[int, tuple[Any, tuple[int, str | None], Planned | None]] = OrderedDict()
        #: Plans made (:data:`PlanOne`; for tests and benchmarks).
        self.plans_made = 0

    # ------------------------------------------------------------------ transactions
    @property
    def in_transaction(self) -> bool:
        return self.txn is not None or self.opened

    def begin(self, *, read_only: bool | None = None) -> None:
        """Open an explicit transaction. Its SQLite transaction (and, unless ``read_only``, the
        write lock) starts with its first statement, not here: a client's BEGIN round trip holds
        no lock. A ``read_only`` one refuses writes (25006) and never blocks a writer; None:
        the session's :attr:`default_read_only`."""
        if self.in_transaction:
            raise TransactionError("there is already a transaction in progress")
        self.opened = True
        self.aborted = False
        self.read_only = self.default_read_only if read_only is None else read_only

    @property
    def refuses_writes(self) -> bool:
        """A write now would be refused with 25006: the transaction is read only, or there is
        none and the session's transactions are read only by default."""
        return self.read_only if self.in_transaction else self.default_read_only

    def set_read_only(self, read_only: bool) -> None:
        """``SET TRANSACTION READ ONLY | READ WRITE``, as PostgreSQL allows it: a transaction may
        turn read only at any point, and read write only before its first statement (25001
        after); outside a transaction it does nothing."""
        if not self.in_transaction:
            return
        if not read_only and self.read_only and self.txn is not None:
            raise ActiveTransaction("transaction read-write mode must be set before any query")
        self.read_only = read_only

    def _start(self) -> Transaction:
        if self.txn is None:
            self.txn = Transaction(self.db, write=not self.read_only)
            self.opened = False
        return self.txn

    def _check_writable(self, stmt: ast.Statement) -> None:
        if self.refuses_writes:
            self.aborted = self.in_transaction
            words = re.sub(r"(?<!^)(?=[A-Z])", " ", type(stmt).__name__).upper()
            raise ReadOnlyTransaction(f"cannot execute {words} in a read-only transaction")

    def commit(self) -> None:
        if not self.in_transaction:
            raise TransactionError("there is no transaction in progress")
        txn, self.txn = self.txn, None
        self.opened = False
        self.read_only = False
        if self.aborted:
            self.aborted = False
            if txn is not None:
                txn.rollback()
            raise TransactionError("the transaction was aborted by an earlier error and has been rolled back")
        if txn is not None:
            txn.commit()

    def rollback(self) -> None:
        self.opened = False
        self.read_only = False
        if self.txn is not None:
            txn, self.txn = self.txn, None
            txn.rollback()
        self.aborted = False

    def close(self) -> None:
        self.rollback()

    # ------------------------------------------------------------------ savepoints
    def savepoint(self, name: str) -> None:
        """``SAVEPOINT``: in a transaction block (which it starts, as a statement would)."""
        with self.db.lock:
            if not self.in_transaction:
                raise NoActiveTransaction("SAVEPOINT can only be used in transaction blocks")
            if self.aborted:
                raise TransactionError(
                    "current transaction is aborted, commands ignored until end of transaction block"
                )
            try:
                self._start().savepoint(name)  # may wait for (or, not waiting, refuse) the write lock
            except BaseException:
                self.aborted = True
                raise

    def release_savepoint(self, name: str) -> None:
        with self.db.lock:
            if not self.in_transaction:
                raise NoActiveTransaction("RELEASE SAVEPOINT can only be used in transaction blocks")
            if self.aborted:
                raise TransactionError(
                    "current transaction is aborted, commands ignored until end of transaction block"
                )
            try:
                if self.txn is None:
                    raise InvalidSavepoint(f'savepoint "{name}" does not exist')
                self.txn.release_savepoint(name)
            except BaseException:
                self.aborted = True  # as any error in a transaction block
                raise

    def rollback_to_savepoint(self, name: str) -> None:
        """``ROLLBACK TO SAVEPOINT``: also the way out of an aborted transaction short of
        ``ROLLBACK``, as in PostgreSQL and CockroachDB (``cockroach_restart``)."""
        with self.db.lock:
            if not self.in_transaction:
                raise NoActiveTransaction("ROLLBACK TO SAVEPOINT can only be used in transaction blocks")
            try:
                if self.txn is None:
                    raise InvalidSavepoint(f'savepoint "{name}" does not exist')
                self.txn.rollback_to_savepoint(name)
            except BaseException:
                self.aborted = True
                raise
            self.aborted = False

    def run(self, fn: Callable[[Transaction], Result], *, write: bool) -> Result:
        """Run ``fn`` in the explicit transaction, or in a transaction of its own that commits
        (``write``) or rolls back when ``fn`` returns; an error aborts an explicit transaction."""
        with self.db.lock:
            if self.txn is not None or self.opened:
                if self.aborted:
                    raise TransactionError(
                        "current transaction is aborted, commands ignored until end of transaction block"
                    )
                txn = self._start()  # may wait for (or, not waiting, refuse) the write lock
                try:
                    return fn(txn)
                except ArithmeticError as exc:
                    self.aborted = True
                    raise arithmetic_error(exc) from exc
                except BaseException:
                    self.aborted = True
                    raise
            txn = Transaction(self.db, write=write)
            try:
                res = fn(txn)
            except ArithmeticError as exc:
                txn.rollback()
                raise arithmetic_error(exc) from exc
            except BaseException:
                txn.rollback()
                raise
            if write:
                txn.commit()
            else:
                txn.rollback()
            return res

    # ------------------------------------------------------------------ dispatch
    def execute(
        self,
        stmt: ast.Statement,
        params: Sequence[Any] = (),
        *,
        bound: Callable[[], ast.Statement] | None = None,
    ) -> Result:
        """Run ``stmt`` with ``params``. ``bound``, if given, makes the same statement with the
        parameters written in as the literals they stand for (a statement of the PostgreSQL
        endpoint's simple protocol, taken from its normalised template): a compiled plan runs
        ``stmt`` with ``params`` (one plan for every text of that shape, as PostgreSQL's and
        CockroachDB's caches key plans by normalised text), anything else runs ``bound()`` the
        long way, exactly as the text parses."""
        h: Handler | None = None
        if bound is not None:
            h = self.statements.handler(stmt)
            if h.plan_one is None:  # no plan: the statement as its text parses
                stmt, params, h = bound(), (), None
                bound = None
        if isinstance(stmt, ast.Begin):
            self.begin(read_only=stmt.read_only)
            return Result(status="BEGIN")
        if isinstance(stmt, ast.Commit):
            self.commit()
            return Result(status="COMMIT")
        if isinstance(stmt, ast.Rollback):
            self.rollback()
            return Result(status="ROLLBACK")
        if isinstance(stmt, ast.Savepoint):
            self.savepoint(self.ident(stmt.name))
            return Result(status="SAVEPOINT")
        if isinstance(stmt, ast.ReleaseSavepoint):
            self.release_savepoint(self.ident(stmt.name))
            return Result(status="RELEASE")
        if isinstance(stmt, ast.RollbackToSavepoint):
            self.rollback_to_savepoint(self.ident(stmt.name))
            return Result(status="ROLLBACK")
        h = h or self.statements.handler(stmt)
        ev = Params(params)
        if h.plan_one is not None:
            fn: Callable[[Transaction], Result] = lambda t: self._run_planned(h, t, stmt, params, ev, bound)  # noqa: E731
        else:
            fn = lambda t: h.run(self, t, stmt, ev)  # noqa: E731
        if h.write and self.refuses_writes:
            self._check_writable(stmt)
        started: int | None = None
        while True:
            try:
                return self.run(fn, write=h.write)
            except RunAgain as again:
                now = self.db.clock.now_ns()
                started = now if started is None else started
                if now - started > again.timeout * 1e9:
                    raise again.timeout_error from None
                if self.cancelled.wait(again.delay):
                    raise QueryCanceled("query execution canceled") from None

    def _run_planned(
        self,
        h: Handler,
        txn: Transaction,
        stmt: ast.Statement,
        params: Sequence[Any],
        ev: Params,
        bound: Callable[[], ast.Statement] | None,
    ) -> Result:
        """A statement of a family that compiles plans (:data:`PlanOne`): by its plan, made once
        per catalog version and keyspace (the version this transaction reads); as any statement
        when it has none. Plans made in a transaction that changed the catalog itself (which a
        rollback takes back, version and all: ``Database.bump_catalog``) serve that statement
        alone."""
        assert h.plan_one is not None
        made_under = (self.db.catalog_version, self.keyspace)
        plans = self._plans
        got = plans.get(id(stmt))
        if got is not None and got[0] is stmt and got[1] == made_under:
            plan = got[2]
            plans.move_to_end(id(stmt))
        else:
            plan = h.plan_one(self, txn, stmt)
            self.plans_made += 1
            if made_under[0] >= 0 and not self.db.catalog_changed:
                plans[id(stmt)] = (stmt, made_under, plan)
                plans.move_to_end(id(stmt))
                if len(plans) > PLANS_KEPT:
                    plans.popitem(last=False)  # the plan used longest ago
        if plan is None:
            if bound is not None:
                return h.run(self, txn, bound(), Params(()))
            return h.run(self, txn, stmt, ev)
        return plan(txn, params)

    def execute_many(self, stmt: ast.Statement, param_rows: Iterable[Sequence[Any]]) -> int:
        """Run ``stmt`` once per parameter tuple in the current transaction; statements whose
        family compiles a bulk plan (single-row INSERT/UPSERT/REPLACE of bound values) write all
        rows at once, everything else runs row by row. ``param_rows`` may be a
        :class:`~changefeed.sql.param_columns.ParamColumns` (rows held as columns)."""
        rows: Sequence[Sequence[Any]] = (
            param_rows if isinstance(param_rows, ParamColumns) else list(param_rows)
        )
        handler = self.statements.handler(stmt)
        if handler.write and self.refuses_writes:
            self._check_writable(stmt)
        plan_many = handler.plan_many
        if plan_many is not None:
            plan = self.run(lambda t: Result(rows=[(plan_many(self, t, stmt),)]), write=False).rows[0][0]
            if plan is not None:
                return self.run(lambda t: Result(rowcount=plan(t, rows)), write=True).rowcount
        total = 0
        with RowMark() as at:
            for at.r, params in enumerate(rows):
                total += self.execute(stmt, params).rowcount
        return total

    # ------------------------------------------------------------------ privileges
    def privileges(self, txn: Transaction) -> UserPrivileges:
        """The session user's effective privileges (cached per catalog version)."""
        return effective(txn.conn, self.user, version=self.db.catalog_version)

    def require(self, txn: Transaction, table: TableSchema, *needed: Privilege) -> None:
        """Raise PermissionDenied, naming the first privilege of ``needed`` the user lacks on ``table``."""
        privs = effective(txn.conn, self.user, version=self.db.catalog_version)
        if not privs.admin:
            check_table_privileges(privs, table, needed)

    # ------------------------------------------------------------------ names
    def ident(self, i: ast.Ident) -> str:
        """An identifier as the dialect folds it: CQL lower-cases unquoted names."""
        if i.quoted:
            return i.name
        return i.name.lower() if self.dialect == "cql" else i.name

    def table_name(self, q: ast.QName) -> str:
        parts = [self.ident(p) for p in q.parts]
        if self.dialect == "sql" and len(parts) >= 2 and parts[-2] == "public":
            del parts[-2]  # CockroachDB's public schema: public.t is t, db.public.t is db.t
        if len(parts) == 1 and self.keyspace is not None:
            return f"{self.keyspace}.{parts[0]}"
        return ".".join(parts)

    def resolve_table(self, txn: Transaction, q: ast.QName) -> TableSchema:
        name = self.table_name(q)
        schema = self.db.find_table(name)
        if schema is None and len(q.parts) == 1 and self.keyspace is not None:
            schema = self.db.find_table(self.ident(q.parts[0]))
        if schema is None:
            if self.dialect == "cql" and len(q.parts) == 1 and self.keyspace is None:
                raise InvalidStatement(
                    f"no keyspace has been specified for table {name}: USE a keyspace or qualify the name"
                )
            raise UndefinedTable(f'table "{name}" does not exist')
        return schema

    def column(self, schema: TableSchema, ident: ast.Ident) -> ColumnSchema:
        name = self.ident(ident)
        col = (
            schema.find_column(name)
            if not ident.quoted
            else next((c for c in schema.columns if c.name == name), None)
        )
        if col is None:
            raise UndefinedColumn(f'column "{name}" does not exist in table {schema.name}')
        return col

    # ------------------------------------------------------------------ values
    def const(self, e: ast.Expr, ev: Params, ctx: EvalContext) -> Any:
        """The value of an expression that reads no column."""
        return Evaluator(self, ev, ctx).eval(e, None)

    def option_value(self, expr: ast.Expr | None, ev: Params) -> Any:
        """A ``WITH`` option's value: a bare name is its own text, no value means true."""
        if expr is None:
            return True
        if isinstance(expr, ast.MapLit):
            return {str(self.option_value(k, ev)): self.option_value(v, ev) for k, v in expr.items}
        if isinstance(expr, ast.Column):
            return expr.name.name
        return self.const(expr, ev, EvalContext(self.db.clock.now_ns(), self.dialect))

    def py_row(self, schema: TableSchema, row: Mapping[int, Any]) -> dict[str, Any]:
        """A stored row as Python values by column name, virtual computed columns included."""
        out = {c.name: c.type.from_db(row.get(c.id)) for c in schema.columns if not c.virtual}
        for c in schema.columns:
            if c.virtual and c.computed is not None:
                try:
                    out[c.name] = c.type.coerce(
                        Evaluator(self, Params(()), EvalContext(0, self.dialect)).eval(
                            astjson.from_json(c.computed), Scope(out)
                        )
                    )
                except ChangefeedError:
                    out[c.name] = None
        return out
