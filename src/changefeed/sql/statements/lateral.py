"""Set-returning functions joined after other tables, whose arguments may read those tables'
columns (PostgreSQL's implicitly LATERAL function calls, ``FROM t, jsonb_each(t.doc) e``): the
function runs once for each row joined so far (:func:`joins.join_lateral`), after the WHERE
conjuncts that read only those rows' columns have filtered them, as PostgreSQL's planner
applies such conjuncts at the scan, before the function is called."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, RowMap, Scope, conjuncts, subexpressions
from changefeed.sql.functions import SET_RETURNING
from changefeed.sql.session import Session
from changefeed.sql.statements import joins, subqueries, table_functions

__all__ = ["join_function", "runs_per_row", "using_names"]


def runs_per_row(j: ast.Join) -> bool:
    """``j`` joins a function that runs for each row joined before it: any function in an
    INNER, CROSS or LEFT join; in a RIGHT or FULL join, one that reads a column (which
    :func:`joins.join_lateral` refuses, as PostgreSQL does); another is read once, as a table."""
    fn = j.source
    if not isinstance(fn, ast.TableFunction):
        return False
    return j.kind not in ("right", "full") or bool(_columns_read(fn.call)[0])


def join_function(
    session: Session,
    joined: joins.Joined,
    j: ast.Join,
    on: ast.Expr | None,
    where: ast.Expr | None,
    evaluator: Evaluator,
) -> joins.Joined:
    """``joined`` joined to the function of ``j`` (see :func:`runs_per_row`)."""
    fn = j.source
    assert isinstance(fn, ast.TableFunction)
    columns, types = table_functions.columns_of(fn)
    name = session.ident(j.table.parts[-1])
    joined = _filtered(joined, where, columns, evaluator)

    def produce(scope: Scope) -> list[tuple[Any, ...]]:
        return table_functions.rows_of(fn, [evaluator.eval(a, scope) for a in fn.call.args])

    using = using_names(session, j, joined, columns)
    joined = joins.join_lateral(joined, j.kind, name, columns, types, produce, on, evaluator, using)
    if len(columns) == 1 and name not in joined.names:
        # A function of one column: its alias names the column too, as in PostgreSQL.
        joined.names[name] = joined.names[f"{name}.{columns[0]}"]
    return joined


def using_names(
    session: Session, j: ast.Join, joined: joins.Joined, columns: Sequence[str]
) -> list[str] | None:
    """The columns ``j`` joins on by name: NATURAL's, ``USING``'s, or None (an ``ON``)."""
    if j.natural:
        return joins.natural_names(joined, columns)
    return [session.ident(u) for u in j.using] if j.using is not None else None


def _filtered(
    joined: joins.Joined, where: ast.Expr | None, later: Sequence[str], evaluator: Evaluator
) -> joins.Joined:
    """``joined``'s rows that pass the conjuncts of ``where`` reading only their columns (so
    that ``FROM t, jsonb_each(t.doc) WHERE jsonb_typeof(t.doc) = 'object'`` never calls the
    function on another document). ``later``: the function's columns (a bare name it has too is
    not the table's)."""
    if where is None or subqueries.has_subquery(where):
        return joined
    names = {k.lower() for k in joined.names}
    taken = {c.lower() for c in later}
    checks = [c for c in conjuncts(where) if _reads_only(c, names, taken)]
    if not checks:
        return joined
    lower = {k.lower(): i for k, i in joined.names.items()}

    def passes(row: tuple[Any, ...]) -> bool:
        scope = Scope(RowMap(row, joined.names, lower))
        return all(evaluator.eval(c, scope) is True for c in checks)

    return replace(joined, rows=[r for r in joined.rows if passes(r)])


def _reads_only(e: object, names: set[str], taken: set[str]) -> bool:
    """``e`` reads columns, each of them one of ``names`` (and, bare, none of ``taken``), and no
    ``*`` or set-returning call."""
    cols, opaque = _columns_read(e)
    if opaque:
        return False
    for c in cols:
        bare = c.name.name.lower()
        key = f"{c.table.name.lower()}.{bare}" if c.table is not None else bare
        if key not in names or (c.table is None and bare in taken):
            return False
    return bool(cols)


def _columns_read(e: object) -> tuple[list[ast.Column], bool]:
    """The columns ``e`` reads, and whether it holds a ``*`` or a set-returning call."""
    cols: list[ast.Column] = []
    opaque = False
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Column):
            cols.append(x)
        elif isinstance(x, ast.Star) or (isinstance(x, ast.FuncCall) and x.name.lower() in SET_RETURNING):
            opaque = True
        stack.extend(subexpressions(x))
    return cols, opaque
