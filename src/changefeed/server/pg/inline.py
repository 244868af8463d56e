"""Which statements the endpoint runs on its event loop instead of its worker pool.

Handing a statement to a worker thread and its result back costs two thread switches and two
hand-overs of the interpreter lock: on this kind of machine several hundred microseconds of CPU,
more than a single-row INSERT itself. Statements that are certain to be short are run on the
loop: a few-row ``INSERT``/``UPSERT``, and ``SELECT``/``UPDATE``/``DELETE`` that name the whole
primary key with ``=`` (one row at most), plus ``BEGIN``/``COMMIT``/``ROLLBACK``. Writes among them never
block the loop: when another writer holds the write lock, the engine refuses before doing
anything, and the statement waits for it on the loop for a short while, then on the pool
(``server.gate_wait.run_inline``). A session alone in its process also runs a long
``INSERT`` of literals and parameters there (:func:`bulk_insert`): nobody waits behind it.
"""

from __future__ import annotations

from collections.abc import Sequence

from changefeed.sql import ast
from changefeed.sql.session import Session

#: An INSERT with at most this many VALUES rows is short.
INLINE_MAX_ROWS = 16


def runs_inline(session: Session, stmts: Sequence[ast.Statement]) -> bool:
    if len(stmts) != 1:
        return False
    stmt = stmts[0]
    if isinstance(stmt, ast.Begin | ast.Commit | ast.Rollback):
        # COMMIT only writes the WAL frames: the endpoint awaits its sync on the loop (group
        # commit), so it never blocks there.
        return True
    if isinstance(stmt, ast.Insert):
        return len(stmt.rows) <= INLINE_MAX_ROWS and all(_simple(e) for row in stmt.rows for e in row)
    if isinstance(stmt, ast.Select):
        if stmt.source is not None:  # FROM [SHOW JOBS WHEN COMPLETE ..] may wait
            return False
        if stmt.table is None:
            return all(_simple(i.expr) for i in stmt.items if not isinstance(i.expr, ast.Star))
        if stmt.order_by or stmt.distinct or stmt.as_of is not None or stmt.joins:
            return False
        return _point(session, stmt.table, stmt.where)
    if isinstance(stmt, ast.Update | ast.Delete):
        return stmt.source is None and _point(session, stmt.table, stmt.where)
    return False


def bulk_insert(stmts: Sequence[ast.Statement]) -> bool:
    """One ``INSERT``/``UPSERT`` of literals and parameters only, however many rows: run on the
    loop by a session alone in its process, as a pipelined batch is (``batch.write_rows``)."""
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Insert):
        return False
    stmt = stmts[0]
    return not stmt.returning and all(_simple(e) for row in stmt.rows for e in row)


def _simple(e: object) -> bool:
    return isinstance(e, ast.Literal | ast.Param)


def _point(session: Session, table: ast.QName, where: ast.Expr | None) -> bool:
    """``where`` is ``k1 = v1 AND k2 = v2 ..`` over the whole primary key of ``table``."""
    schema = session.db.find_table(session.table_name(table))
    if schema is None or where is None:
        return False
    named: set[str] = set()
    stack = [where]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.BinaryOp) and e.op == "AND":
            stack += [e.left, e.right]
        elif isinstance(e, ast.BinaryOp) and e.op == "=":
            col, val = (e.left, e.right) if isinstance(e.left, ast.Column) else (e.right, e.left)
            if not isinstance(col, ast.Column) or not _simple(val):
                return False
            named.add(session.ident(col.name))
        else:
            return False
    return {c.name for c in schema.key} <= named
