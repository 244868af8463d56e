"""``VALUES (..), (..)`` as a query: alone, or in FROM as ``(VALUES ..) AS v(x, y)``.

Each row's expressions are evaluated once, in order; every row must have as many values as the
first (42601). The columns are ``column1``, ``column2`` .. as PostgreSQL names them, or the
alias's column names (fewer name the first columns; more than there are columns is 42P10)."""

from __future__ import annotations

from changefeed.engine.txn import Transaction
from changefeed.exceptions import ColumnCountMismatch, InvalidColumnReference
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Params
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import subqueries
from changefeed.sql.statements.select import run_in

FAMILY = StatementFamily("values_lists")


@FAMILY.statement(ast.Values, write=False)
def values(session: Session, txn: Transaction, s: ast.Values, ev: Params) -> Result:
    width = len(s.rows[0])
    if any(len(r) != width for r in s.rows):
        raise ColumnCountMismatch("VALUES lists must all be the same length")
    names = [session.ident(n) for n in s.names]
    if len(names) > width:
        raise InvalidColumnReference(
            f"table has {width} columns available but {len(names)} columns specified"
        )
    columns = names + [f"column{i + 1}" for i in range(len(names), width)]
    rows_in = s.rows
    if subqueries.has_subquery(rows_in):
        rows_in = subqueries.fold(rows_in, run_in(session, txn, ev))
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    rows = [tuple(evaluator.eval(e, None) for e in r) for r in rows_in]
    return Result(
        columns=columns, rows=rows, types=[None] * width, status=f"SELECT {len(rows)}", rowcount=len(rows)
    )
