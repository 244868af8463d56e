"""Set-returning functions read as tables, as PostgreSQL and CockroachDB read them:
``generate_series(start, stop [, step])`` of integers, decimals or timestamps (with an interval
step), and ``unnest(array)``. Their one column is named by the alias (``FROM
generate_series(1, 3) AS i``), else by the function. A series longer than :data:`MAX_ROWS` is
refused (PostgreSQL would stream it; the rows here are held in memory)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from changefeed.engine.txn import Transaction
from changefeed.engine.type_errors import value_type
from changefeed.exceptions import InvalidArgument, StatementTooComplex, UndefinedFunction
from changefeed.sql import ast
from changefeed.sql.array_text import array_literal
from changefeed.sql.evaluator import Evaluator, Params
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily

FAMILY = StatementFamily("table_functions")

#: Rows a set-returning function may give.
MAX_ROWS = 10_000_000


@FAMILY.statement(ast.TableFunction, write=False)
def table_function(session: Session, txn: Transaction, s: ast.TableFunction, ev: Params) -> Result:
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    name = s.call.name.lower()
    args = [evaluator.eval(a, None) for a in s.call.args]
    if name == "generate_series":
        values = _series(args)
    elif name == "unnest":
        values = _unnest(args)
    else:
        raise UndefinedFunction(f"unknown function: {s.call.name}() (not a set-returning function)")
    rows = []
    for v in values:
        rows.append((v,))
        if len(rows) > MAX_ROWS:
            raise StatementTooComplex(f"{name} would return more than {MAX_ROWS} rows")
    return Result(columns=[s.column], rows=rows, status=f"SELECT {len(rows)}", rowcount=len(rows))


def _series(args: list[Any]) -> Iterator[Any]:
    if len(args) not in (2, 3):
        raise UndefinedFunction(f"unknown signature: generate_series({', '.join('...' for _ in args)})")
    if any(a is None for a in args):
        return iter(())
    start, stop = args[0], args[1]
    if isinstance(start, dt.datetime) or isinstance(stop, dt.datetime):
        if len(args) != 3 or not isinstance(args[2], dt.timedelta):
            raise UndefinedFunction(
                "unknown signature: generate_series(timestamp, timestamp) (give an interval step)"
            )
        return _steps(start, stop, args[2], zero=dt.timedelta(0))
    numbers = [a for a in args if isinstance(a, int | Decimal) and not isinstance(a, bool)]
    if len(numbers) != len(args):
        shown = ", ".join(value_type(a) for a in args)
        raise UndefinedFunction(f"unknown signature: generate_series({shown})")
    step = args[2] if len(args) == 3 else 1
    return _steps(start, stop, step, zero=0)


def _steps(start: Any, stop: Any, step: Any, *, zero: Any) -> Iterator[Any]:
    if step == zero:
        exc = InvalidArgument("step size cannot equal zero")
        exc.code = "22023"
        raise exc
    v = start
    while (v <= stop) if step > zero else (v >= stop):
        yield v
        v = v + step


def _unnest(args: list[Any]) -> Iterator[Any]:
    if len(args) != 1:
        raise UndefinedFunction(f"unknown signature: unnest({', '.join('...' for _ in args)})")
    arr = args[0]
    if arr is None:
        return iter(())
    if isinstance(arr, str):
        arr = array_literal(arr)
    if not isinstance(arr, list | tuple):
        raise UndefinedFunction(f"unknown signature: unnest({value_type(arr)})")
    return iter(arr)
