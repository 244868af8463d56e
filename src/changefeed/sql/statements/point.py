"""Compiled point reads: ``SELECT <columns> FROM t WHERE <primary key> = <values>`` planned once
and run as one SQLite statement.

A server runs the same few statements again and again (pgbench's ``SELECT v FROM t WHERE id =
$1``, an application's lookups by key). Through the general path each run resolves the table,
checks privileges, builds a relation, an evaluator and a scope, pushes the key down and evaluates
the WHERE on the row it read, in four SQLite calls (BEGIN, the catalog version, the row,
ROLLBACK). :func:`plan_point` does the statement's part of that once, for the plain shape only
(a SQL table without computed or static columns, ``*`` or plain columns, the whole primary key
with ``=``), and :meth:`PointRead.run` then reads the catalog version and the row in one
statement (one snapshot) and returns what the general path returns for the same statement.

Anything the plan is not sure about is left to the general path: :meth:`PointRead.run` returns
None when the catalog moved since planning (the caller plans again), in an explicit transaction,
for a key value whose comparison with the column the general path might judge differently
(only integers, and ASCII integer text, for integer columns and text for text columns are
taken), or for a row written with a TTL.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from changefeed.engine.catalog import ColumnSchema
from changefeed.engine.privileges import Privilege
from changefeed.engine.storage import TableStore
from changefeed.engine.txn import Transaction
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedError
from changefeed.sql import ast
from changefeed.sql.result import Result
from changefeed.sql.session import Session
from changefeed.sql.statements import select as select_family

#: Integer text the general path compares equal to the integer it denotes.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_INT_KINDS = (Kind.INT, Kind.UINT)


@dataclass(frozen=True, slots=True)
class PointRead:
    """A planned point read (see the module docstring)."""

    version: int
    user: str
    sql: str
    #: Per primary-key column: the parameter index it takes, or -1 for ``consts``' value.
    key_params: tuple[int, ...]
    consts: tuple[Any, ...]
    key_cols: tuple[ColumnSchema, ...]
    #: Row positions of the result's columns, and conversions of the ones not stored as is.
    picks: tuple[int, ...]
    changing: tuple[tuple[int, Callable[[Any], Any]], ...]
    width: int
    #: Row position of a primary-key column (NULL only when there is no row).
    key_at: int
    columns: tuple[str, ...]
    types: tuple[SqlType, ...]

    def run(self, session: Session, params: Sequence[Any]) -> Result | None:
        """The statement's result, or None: the general path must run it (see the module
        docstring)."""
        if session.txn is not None or session.opened or session.user != self.user:
            return None
        key: list[Any] = []
        for col, pi, const in zip(self.key_cols, self.key_params, self.consts, strict=True):
            if pi >= 0:
                if pi >= len(params):
                    return None
                v = params[pi]
            else:
                v = const
            stored = _key_value(col, v)
            if stored is None:
                return None
            key.append(stored)
        db = session.db
        with db.lock:
            try:
                got = db.conn.execute(self.sql, key).fetchone()
            except sqlite3.Error:
                return None
        if got is None or got[0] != self.version:
            return None
        rows: list[tuple[Any, ...]] = []
        width = self.width
        if got[1 + self.key_at] is not None:
            marker, expires = got[width + 1], got[width + 2]
            if expires is not None or marker:
                return None  # a row with a TTL: the general path decides what is live
            row = [got[1 + i] for i in self.picks]
            for i, convert in self.changing:
                if row[i] is not None:
                    row[i] = convert(row[i])
            rows.append(tuple(row))
        return Result(
            columns=list(self.columns),
            rows=rows,
            types=list(self.types),
            status=f"SELECT {len(rows)}",
            rowcount=len(rows),
        )


def _key_value(col: ColumnSchema, v: Any) -> Any:
    """The storage value the general path would look ``v`` up by, or None when it is not sure."""
    kind = col.type.kind
    value: Any
    if kind in _INT_KINDS:
        if type(v) is int:
            value = v
        elif type(v) is str and _INT_TEXT.fullmatch(v):
            value = int(v)
        else:
            return None
    elif kind is Kind.TEXT and type(v) is str and col.type.length is None:
        value = v
    else:
        return None
    try:
        return col.type.to_db(col.type.coerce(value, f"column {col.name}"))
    except (ChangefeedError, ValueError, TypeError, OverflowError):
        return None


def plan_point(session: Session, stmt: ast.Statement) -> PointRead | None:
    """A point-read plan of ``stmt``, or None when it is not a plain point read."""
    if not isinstance(stmt, ast.Select) or session.dialect != "sql" or stmt.table is None:
        return None
    if (
        stmt.order_by
        or stmt.limit is not None
        or stmt.offset is not None
        or stmt.having is not None
        or stmt.joins
        or stmt.distinct
        or stmt.as_of is not None
        or stmt.where is None
    ):
        return None
    for it in stmt.items:
        if not isinstance(it.expr, ast.Star | ast.Column):
            return None
        if isinstance(it.expr, ast.Column) and it.expr.table is not None:
            return None
    if session.txn is not None or session.opened or session.db.conn.in_transaction:
        return None  # planned outside transactions only (and run outside them)
    txn = Transaction(session.db, write=False)
    try:
        return _plan(session, txn, stmt)
    except (ChangefeedError, sqlite3.Error):
        return None  # the general path reports it
    finally:
        txn.rollback()


def _plan(session: Session, txn: Transaction, s: ast.Select) -> PointRead | None:
    assert s.table is not None
    name = session.table_name(s.table)
    for virtual in select_family.VIRTUAL_RELATIONS:
        if virtual(session, txn, name) is not None:
            return None
    for claims in select_family.SELECT_CLAIMS:
        if claims(session, s):
            return None
    schema = session.db.find_table(name)
    if schema is None or schema.is_cql:
        return None
    session.require(txn, schema, Privilege.SELECT)
    st = TableStore(schema)
    if st.static_cols or any(c.virtual for c in schema.columns):
        return None
    if len(schema.partition_key) != len(schema.key):
        return None
    # WHERE: k1 = v1 AND k2 = v2 .. naming every key column once, with parameters or constants.
    wanted = {c.name.lower(): c for c in schema.key}
    given: dict[int, ast.Expr] = {}
    stack: list[ast.Expr] = [s.where] if s.where is not None else []
    while stack:
        e = stack.pop()
        if isinstance(e, ast.BinaryOp) and e.op == "AND":
            stack += [e.left, e.right]
            continue
        if not (isinstance(e, ast.BinaryOp) and e.op == "="):
            return None
        col, val = (e.left, e.right) if isinstance(e.left, ast.Column) else (e.right, e.left)
        if not isinstance(col, ast.Column) or col.table is not None:
            return None
        if not isinstance(val, ast.Param | ast.Literal):
            return None
        c = wanted.get(session.ident(col.name).lower())
        if c is None or c.id in given:
            return None
        given[c.id] = val
    pk = schema.partition_key
    if set(given) != {c.id for c in pk}:
        return None
    key_params = tuple(v.index if isinstance(v, ast.Param) else -1 for v in (given[c.id] for c in pk))
    consts = tuple(v.value if isinstance(v, ast.Literal) else None for v in (given[c.id] for c in pk))
    # The select list, resolved as select_over resolves it.
    cols = list(schema.columns)
    names = [c.name for c in cols]
    index = {n: i for i, n in enumerate(names)}
    lower_index: dict[str, int] = {}
    for n, i in index.items():
        lower_index.setdefault(n.lower(), i)
    out: list[tuple[str, int]] = []
    for it in s.items:
        if isinstance(it.expr, ast.Star):
            out += [(n, index[n]) for n in names]
            continue
        assert isinstance(it.expr, ast.Column)
        ident = session.ident(it.expr.name)
        at = index.get(ident)
        if at is None:
            at = lower_index.get(ident.lower())
        if at is None:
            return None  # the general path raises the error
        label = session.ident(it.alias) if it.alias is not None else ident
        out.append((label, at))
    pos = {c.id: i for i, c in enumerate(st.row_cols)}
    if any(cols[at].id not in pos for _, at in out):
        return None
    picks = tuple(pos[cols[at].id] for _, at in out)
    changing = tuple(
        (i, cols[at].type.from_db) for i, (_, at) in enumerate(out) if not cols[at].type.stored_as_is
    )
    sql = (
        "SELECT m.value, r.* FROM _meta AS m LEFT JOIN "
        f"(SELECT {st.row_select} FROM {st.t} WHERE {st.pk_where}) AS r "
        "WHERE m.key = 'catalog_version'"
    )
    return PointRead(
        version=session.db.catalog_version,
        user=session.user,
        sql=sql,
        key_params=key_params,
        consts=consts,
        key_cols=pk,
        picks=picks,
        changing=changing,
        width=len(st.row_cols),
        key_at=pos[pk[0].id],
        columns=tuple(label for label, _ in out),
        types=tuple(cols[at].type for _, at in out),
    )
