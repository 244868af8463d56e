"""``TRUNCATE``: every row of a table goes, in the statement's transaction, in both dialects.

CQL (ScyllaDB): ``TRUNCATE [TABLE] ks.t`` removes every row and static row without a CDC log
entry, as ScyllaDB does (a truncation is no mutation, so its CDC log does not show it, and the log
keeps what it had); ``TRUNCATE ks.t_scylla_cdc_log`` empties the log.

SQL (PostgreSQL, CockroachDB): ``TRUNCATE [TABLE] [ONLY] t [*] [, ..] [RESTART | CONTINUE
IDENTITY] [CASCADE | RESTRICT]``. Every table named is resolved and its privilege checked before
any row goes (the DROP privilege, as CockroachDB asks), and the statement is transactional, as in
PostgreSQL: rolled back, nothing happened. Each row's delete is a change like any other: the
table's CDC log, its changefeeds and its Phoenix CDC see one delete per row, so a replica fed by a
changefeed stays equal to the table. (PostgreSQL's logical decoding sends one TRUNCATE message
instead, and CockroachDB fails the changefeeds of a truncated table; here a feed goes on.) No
sequence restarts (``SERIAL`` is ``unique_rowid()`` here, as in CockroachDB) and there are no
foreign keys to cascade along, so those options change nothing.

Either way the rows go through the engine's deletes, so a table's change stream, when one is on,
erases them as any delete would.
"""

from __future__ import annotations

import dataclasses

from changefeed.engine import replicas
from changefeed.engine.catalog import CdcOptions, TableSchema
from changefeed.engine.privileges import Privilege
from changefeed.engine.txn import Transaction
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import LOG_SUFFIX, log_base_table

__all__ = ["FAMILY"]

FAMILY = StatementFamily("truncate")


@FAMILY.statement(ast.Truncate)
def truncate(session: Session, txn: Transaction, s: ast.Truncate, ev: Params) -> Result:
    cql = session.dialect == "cql"
    # Every name first (missing tables, privileges, read-only replicas), then the rows.
    logs: dict[str, TableSchema] = {}
    tables: dict[str, TableSchema] = {}
    for q in s.tables:
        name = session.table_name(q)
        if name.endswith(LOG_SUFFIX) and session.db.find_table(name) is None:
            base = log_base_table(session, txn, q, Privilege.DELETE)
            logs.setdefault(base.name, base)
            continue
        schema = session.resolve_table(txn, q)
        session.require(txn, schema, Privilege.DELETE if cql else Privilege.DROP)
        replicas.check_writable(schema)
        tables.setdefault(schema.name, schema)
    for base in logs.values():
        txn.conn.execute(f"DELETE FROM {txn.store(base).j}")
    for schema in tables.values():
        _empty(txn, schema, logged=not cql)
    return Result(status="TRUNCATE" if cql else "TRUNCATE TABLE")


def _empty(txn: Transaction, schema: TableSchema, *, logged: bool) -> None:
    """Delete every row (and static row) of ``schema``; ``logged``: each delete goes to its CDC
    log as any delete does, else the log does not see them (the change stream always does)."""
    st = txn.store(schema)
    target = schema if logged else dataclasses.replace(schema, cdc=CdcOptions())
    if not schema.changes and not target.cdc.enabled:  # nothing records the deletes: all at once
        txn.conn.execute(f"DELETE FROM {st.t}")
        if st.static_cols:
            txn.conn.execute(f"DELETE FROM {st.s}")
    elif schema.is_cql:
        pk = ", ".join(c.db for c in st.pk_cols)
        sql = f"SELECT DISTINCT {pk} FROM {st.t}"
        if st.static_cols:
            sql += f" UNION SELECT {pk} FROM {st.s}"
        for part in list(txn.conn.execute(sql)):
            txn.delete_partition(target, tuple(part))
    else:
        keys = ", ".join(c.db for c in st.key_cols)
        txn.delete_rows(target, [tuple(k) for k in txn.conn.execute(f"SELECT {keys} FROM {st.t}")])
