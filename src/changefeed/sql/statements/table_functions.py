"""Set-returning functions, as PostgreSQL and CockroachDB run them: read as tables (in FROM,
first or joined, where their arguments may name the columns of the tables before them, as
PostgreSQL's implicitly LATERAL function calls), or at the top of a SELECT list (each row
repeated for their values, :func:`expand`): ``generate_series(start, stop [, step])`` of
integers, decimals or timestamps (with an interval step), ``unnest(array)``, the JSON ones
(``jsonb_each[_text]`` of two columns, ``key`` and ``value``) and the regular expression ones.
A one-column function's column is named by the alias (``FROM generate_series(1, 3) AS i``), else
by the function; ``AS a (x, y)`` renames the first columns, and ``WITH ORDINALITY`` adds a last
one, ``ordinality``. In a SELECT list a two-column function gives its rows as record text,
``(key,value)``. A series longer than :data:`MAX_ROWS` is refused (PostgreSQL would stream it;
the rows here are held in memory)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_literal
from changefeed.engine.txn import Transaction
from changefeed.engine.type_errors import value_type
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import SqlType
from changefeed.exceptions import InvalidColumnReference, StatementTooComplex, UndefinedFunction
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Params, subexpressions
from changefeed.sql.function_errors import invalid_argument
from changefeed.sql.functions import SET_RETURNING, EvalContext
from changefeed.sql.json_ops import document
from changefeed.sql.regex_functions import matches, split_to_table
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily

FAMILY = StatementFamily("table_functions")

#: Rows a set-returning function may give.
MAX_ROWS = 10_000_000
_JSONB = resolve_type("JSONB", dialect="sql")
_TEXT = resolve_type("STRING", dialect="sql")
_INT = resolve_type("INT8", dialect="sql")
#: The functions of several columns: their columns' names and types.
_COLUMNS: dict[str, tuple[tuple[str, SqlType], ...]] = {
    "jsonb_each": (("key", _TEXT), ("value", _JSONB)),
    "json_each": (("key", _TEXT), ("value", _JSONB)),
    "jsonb_each_text": (("key", _TEXT), ("value", _TEXT)),
    "json_each_text": (("key", _TEXT), ("value", _TEXT)),
}


@FAMILY.statement(ast.TableFunction, write=False)
def table_function(session: Session, txn: Transaction, s: ast.TableFunction, ev: Params) -> Result:
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    columns, types = columns_of(s)
    rows = rows_of(s, [evaluator.eval(a, None) for a in s.call.args])
    return Result(columns=columns, rows=rows, types=types, status=f"SELECT {len(rows)}", rowcount=len(rows))


def columns_of(s: ast.TableFunction) -> tuple[list[str], list[SqlType | None]]:
    """The names and types of the columns ``s`` reads as a table (types not known before the
    values, such as a series', are None)."""
    name = s.call.name.lower()
    several = _COLUMNS.get(name)
    columns: list[str]
    types: list[SqlType | None]
    if several is not None:
        columns, types = [c for c, _ in several], [t for _, t in several]
    else:
        columns = [s.column]
        types = [
            _JSONB
            if name in ("jsonb_array_elements", "json_array_elements")
            else _TEXT
            if name in _JSON_SETS or name == "regexp_split_to_table"
            else None
        ]
    if s.ordinality:
        columns.append("ordinality")
        types.append(_INT)
    if len(s.names) > len(columns):
        raise InvalidColumnReference(
            f"table has {len(columns)} columns available but {len(s.names)} columns specified"
        )
    return [*s.names, *columns[len(s.names) :]], types


def rows_of(s: ast.TableFunction, args: list[Any]) -> list[tuple[Any, ...]]:
    """The rows of ``s`` for its arguments' values."""
    values = values_of(s.call, args)
    rows = values if s.call.name.lower() in _COLUMNS else [(v,) for v in values]
    if s.ordinality:
        return [(*r, i) for i, r in enumerate(rows, start=1)]
    return rows


def list_values(call: ast.FuncCall, args: list[Any]) -> list[Any]:
    """The values ``call`` gives at the top of a SELECT list: a several-column function's rows
    as PostgreSQL's record text, ``(a,1)``."""
    values = values_of(call, args)
    if call.name.lower() in _COLUMNS:
        return [record_text(v) for v in values]
    return values


def record_text(values: tuple[Any, ...]) -> str:
    """A row as PostgreSQL prints a record: each field's text, quoted when empty or holding a
    quote, backslash, parenthesis, comma or space (quotes and backslashes doubled), NULL as
    nothing."""
    out = []
    for v in values:
        if v is None:
            out.append("")
            continue
        if isinstance(v, json_doc.JsonText):  # jsonb as its output prints it: {"a": [1, 2]}
            t = json_doc.spaced(json_doc.loads(str(v)), pg_order=True)
        else:
            t = v if isinstance(v, str) else json_doc.spaced(v) if isinstance(v, dict | list) else str(v)
        if t == "" or any(ch in t for ch in '"\\(),') or any(ch.isspace() for ch in t):
            t = '"' + t.replace("\\", "\\\\").replace('"', '""') + '"'
        out.append(t)
    return "(" + ",".join(out) + ")"


def values_of(call: ast.FuncCall, args: list[Any]) -> list[Any]:
    """The values set-returning function ``call`` gives for its arguments' values."""
    name = call.name.lower()
    if name == "generate_series":
        values = _series(args)
    elif name == "unnest":
        values = _unnest(args)
    elif name in _JSON_SETS:
        values = _json_set(name, args)
    elif name in _COLUMNS:
        values = _json_each(name, args)
    elif name == "regexp_split_to_table":
        values = iter(split_to_table(args))
    elif name == "regexp_matches":
        values = iter(matches(args))
    else:
        raise UndefinedFunction(f"unknown function: {call.name}() (not a set-returning function)")
    out = []
    for v in values:
        out.append(v)
        if len(out) > MAX_ROWS:
            raise StatementTooComplex(f"{name} would return more than {MAX_ROWS} rows")
    return out


#: The JSON functions that return a set: object keys, array elements (as JSONB or as text).
_JSON_SETS = frozenset(
    {"jsonb_object_keys", "json_object_keys", "jsonb_array_elements", "json_array_elements",
     "jsonb_array_elements_text", "json_array_elements_text"}
)  # fmt: skip


def _json_set(name: str, args: list[Any]) -> Iterator[Any]:
    """``jsonb_object_keys(doc)``, ``jsonb_array_elements[_text](doc)`` (22023 for a document of
    the other shape, as PostgreSQL's)."""
    if len(args) != 1:
        raise UndefinedFunction(f"unknown signature: {name}({', '.join('...' for _ in args)})")
    if args[0] is None:
        return iter(())
    doc = document(args[0], lambda: UndefinedFunction(f"unknown signature: {name}({value_type(args[0])})"))
    if name.endswith("object_keys"):
        if not isinstance(doc, dict):
            raise invalid_argument(f"cannot call {name} on {_shape(doc)}", "22023")
        return iter(list(doc))
    if not isinstance(doc, list):
        raise invalid_argument(f"cannot extract elements from {_shape(doc)}", "22023")
    if name.endswith("_text"):
        return iter([None if v is None else v if isinstance(v, str) else json_doc.spaced(v) for v in doc])
    return iter([json_doc.JsonText(json_doc.dumps(v)) for v in doc])


def _json_each(name: str, args: list[Any]) -> Iterator[tuple[Any, ...]]:
    """``jsonb_each(doc)``: an object's fields as (key, value) rows, the value as JSONB, or as
    text for ``_text`` (a JSON string unquoted, a JSON null as NULL); 22023 for a document that
    is no object, as PostgreSQL's."""
    if len(args) != 1:
        raise UndefinedFunction(f"unknown signature: {name}({', '.join('...' for _ in args)})")
    if args[0] is None:
        return iter(())
    doc = document(args[0], lambda: UndefinedFunction(f"unknown signature: {name}({value_type(args[0])})"))
    if not isinstance(doc, dict):
        raise invalid_argument(f"cannot call {name} on a non-object", "22023")
    if name.endswith("_text"):
        return iter(
            [
                (k, None if v is None else v if isinstance(v, str) else json_doc.spaced(v))
                for k, v in doc.items()
            ]
        )
    return iter([(k, json_doc.JsonText(json_doc.dumps(v))) for k, v in doc.items()])


def _shape(doc: Any) -> str:
    return "an object" if isinstance(doc, dict) else "an array" if isinstance(doc, list) else "a scalar"


def set_returning_calls(exprs: list[Any]) -> list[ast.FuncCall]:
    """The distinct set-returning calls in ``exprs`` (not inside subqueries or window calls)."""
    found: list[ast.FuncCall] = []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        if isinstance(e, ast.FuncCall) and e.name.lower() in SET_RETURNING:
            if e not in found:
                found.append(e)
            continue
        if isinstance(e, ast.WindowCall):
            continue
        stack.extend(reversed(list(subexpressions(e))))
    return found


def expand(
    rows: list[tuple[Any, ...]],
    calls: list[ast.FuncCall],
    values: Callable[[tuple[Any, ...], ast.FuncCall], list[Any]],
) -> list[tuple[Any, ...]]:
    """A SELECT list's set-returning calls, as PostgreSQL runs them: each row repeated as many
    times as its longest call has values, with each call's values side by side (NULL past a
    shorter one's end); a row for which every call is empty goes."""
    out: list[tuple[Any, ...]] = []
    for r in rows:
        lists = [values(r, c) for c in calls]
        for i in range(max((len(v) for v in lists), default=0)):
            out.append((*r, *(v[i] if i < len(v) else None for v in lists)))
            if len(out) > MAX_ROWS:
                raise StatementTooComplex(f"set-returning functions would give more than {MAX_ROWS} rows")
    return out


def substitute(e: Any, columns: dict[ast.FuncCall, ast.Expr]) -> Any:
    """``e`` with each set-returning call of ``columns`` replaced by its column."""
    if isinstance(e, ast.FuncCall) and e in columns:
        return columns[e]
    if isinstance(e, tuple):
        return tuple(substitute(x, columns) for x in e)
    if not dataclasses.is_dataclass(e) or isinstance(e, type | ast.Select | ast.Ident | ast.TypeName):
        return e
    return dataclasses.replace(
        e, **{f.name: substitute(getattr(e, f.name), columns) for f in dataclasses.fields(e)}
    )


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
        raise invalid_argument("step size cannot equal zero", "22023")
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
