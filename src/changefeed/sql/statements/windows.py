"""Window functions: ``f(..) OVER ([PARTITION BY ..] [ORDER BY ..] [frame])`` in a SELECT list or
its ORDER BY, computed over the rows the WHERE kept (before DISTINCT, ORDER BY and LIMIT), as
PostgreSQL and CockroachDB compute them.

Each row gets one value per distinct window call. The rows are split into partitions by the
PARTITION BY values and each partition is sorted by the window's ORDER BY; rows that sort equal
are *peers*. The ranking functions (``row_number``, ``rank``, ``dense_rank``, ``percent_rank``,
``cume_dist``, ``ntile``) and ``lag``/``lead`` read the partition; aggregates and
``first_value``/``last_value``/``nth_value`` read the row's *frame*: by default from the
partition's first row to the current row's last peer (the whole partition without ORDER BY),
else ``ROWS`` (rows before and after), ``GROUPS`` (peer groups before and after) or ``RANGE``
(``UNBOUNDED``/``CURRENT ROW`` bounds; an offset RANGE is not supported). A frame that starts at
the partition's first row is computed as a running total, in one pass over the partition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from changefeed.engine.type_errors import value_type
from changefeed.exceptions import (
    DatatypeMismatch,
    UndefinedFunction,
    UnsupportedFeature,
    WindowingError,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import (
    Evaluator,
    Scope,
    average,
    distinct_key,
    order_key,
    reduce_aggregate,
    subexpressions,
    widened_sum,
)
from changefeed.sql.function_errors import invalid_argument
from changefeed.sql.functions import AGGREGATES
from changefeed.sql.numeric import exact_add

#: Aggregates computed as running totals when the frame starts at the partition's first row.
_RUNNING = frozenset({"count", "sum", "avg", "min", "max"})


def window_calls(exprs: Iterable[Any]) -> list[ast.WindowCall]:
    """The distinct window calls in ``exprs`` (not inside subqueries), in order of appearance;
    one nested in another's arguments, PARTITION BY or ORDER BY is refused (42P20)."""
    found: list[ast.WindowCall] = []
    stack = [e for e in exprs if e is not None][::-1]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.WindowCall):
            if any(has_window(x) for x in (e.call, e.partition_by, e.order_by)):
                raise WindowingError("window function calls cannot be nested")
            if e not in found:
                found.append(e)
            continue
        stack.extend(reversed(list(subexpressions(e))))
    return found


def has_window(e: Any) -> bool:
    """Whether ``e`` holds a window call (not inside a subquery)."""
    if isinstance(e, ast.WindowCall):
        return True
    return any(has_window(x) for x in subexpressions(e))


def refuse_in(clause: str, e: Any) -> None:
    """PostgreSQL's 42P20 for a window call where the rows are not final yet."""
    if e is not None and has_window(e):
        raise WindowingError(f"window functions are not allowed in {clause}")


def substitute(e: Any, columns: Mapping[ast.WindowCall, ast.Expr]) -> Any:
    """``e`` with each window call of ``columns`` replaced by its column."""
    if isinstance(e, ast.WindowCall):
        return columns[e]
    if isinstance(e, tuple):
        return tuple(substitute(x, columns) for x in e)
    if not dataclasses.is_dataclass(e) or isinstance(e, type | ast.Select | ast.Ident | ast.TypeName):
        return e
    if not has_window(e):
        return e
    changes = {f.name: substitute(getattr(e, f.name), columns) for f in dataclasses.fields(e)}
    return dataclasses.replace(e, **changes)


def group_column(k: int) -> str:
    """The name of the ``k``-th per-group value of a grouped query with window calls."""
    return f"\0group {k}"


def lift_groups(exprs: list[Any]) -> tuple[list[Any], list[ast.Expr]]:
    """A grouped query's select list and ORDER BY (``exprs``) rewritten for its window calls,
    which run over the groups: each aggregate, column and subquery read outside a window's own
    computation becomes a per-group value (the second list, which GROUP BY computes for each
    group as it computes a select list), read by its :func:`group_column` name."""
    values: list[ast.Expr] = []

    def value(e: ast.Expr) -> ast.Expr:
        if e not in values:
            values.append(e)
        return ast.Column(ast.Ident(group_column(values.index(e)), True))

    def lift(e: Any) -> Any:
        if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
            return value(e)
        if isinstance(e, ast.Column | ast.Subquery):
            return value(e)
        if isinstance(e, ast.WindowCall):
            call = dataclasses.replace(e.call, args=lift(e.call.args), filter=lift(e.call.filter))
            order = tuple(dataclasses.replace(o, expr=lift(o.expr)) for o in e.order_by)
            return dataclasses.replace(e, call=call, partition_by=lift(e.partition_by), order_by=order)
        if isinstance(e, tuple):
            return tuple(lift(x) for x in e)
        if not dataclasses.is_dataclass(e) or isinstance(e, type | ast.Select | ast.Ident | ast.TypeName):
            return e
        return dataclasses.replace(e, **{f.name: lift(getattr(e, f.name)) for f in dataclasses.fields(e)})

    return [lift(e) for e in exprs], values


def compute(evaluator: Evaluator, scopes: Sequence[Scope], call: ast.WindowCall) -> list[Any]:
    """The value of ``call`` for each of ``scopes`` (the query's rows, in their order)."""
    partitions: dict[tuple[Any, ...], list[int]] = {}
    for i, sc in enumerate(scopes):
        key = tuple(distinct_key(evaluator.eval(p, sc)) for p in call.partition_by)
        partitions.setdefault(key, []).append(i)
    out: list[Any] = [None] * len(scopes)
    for rows in partitions.values():
        ordered, peers = _ordered(evaluator, scopes, rows, call.order_by)
        values = _partition(evaluator, [scopes[i] for i in ordered], peers, call)
        for i, v in zip(ordered, values, strict=True):
            out[i] = v
    return out


def _ordered(
    evaluator: Evaluator, scopes: Sequence[Scope], rows: list[int], order_by: tuple[ast.OrderItem, ...]
) -> tuple[list[int], list[int]]:
    """The partition's rows sorted by the window's ORDER BY (stable: ties keep the query's
    order), and each position's peer group number."""
    if not order_by:
        return rows, [0] * len(rows)
    keys = {i: [order_key(evaluator.eval(o.expr, scopes[i]), o) for o in order_by] for i in rows}
    ordered = list(rows)
    for n in reversed(range(len(order_by))):
        ordered.sort(key=_nth_key(keys, n), reverse=order_by[n].descending)
    peers: list[int] = []
    group = 0
    for pos, i in enumerate(ordered):
        if pos and keys[i] != keys[ordered[pos - 1]]:
            group += 1
        peers.append(group)
    return ordered, peers


def _nth_key(keys: Mapping[int, list[tuple[int, Any]]], n: int) -> Callable[[int], tuple[int, Any]]:
    return lambda i: keys[i][n]


def _partition(
    evaluator: Evaluator, scopes: list[Scope], peers: list[int], call: ast.WindowCall
) -> list[Any]:
    """The values of ``call`` for one partition's rows, sorted (``peers``: their peer groups)."""
    name = call.call.name.lower()
    args = call.call.args
    n = len(scopes)
    first_peer: dict[int, int] = {}
    last_peer: dict[int, int] = {}
    for pos, g in enumerate(peers):
        first_peer.setdefault(g, pos)
        last_peer[g] = pos
    if name == "row_number":
        return list(range(1, n + 1))
    if name == "rank":
        return [first_peer[g] + 1 for g in peers]
    if name == "dense_rank":
        return [g + 1 for g in peers]
    if name == "percent_rank":
        return [(first_peer[g]) / (n - 1) if n > 1 else 0.0 for g in peers]
    if name == "cume_dist":
        return [(last_peer[g] + 1) / n for g in peers]
    if name == "ntile":
        return _ntile(evaluator, scopes, args)
    if name in ("lag", "lead"):
        return _shifted(evaluator, scopes, args, -1 if name == "lag" else 1)
    frames = _frames(evaluator, call.frame, peers, first_peer, last_peer)
    if name in ("first_value", "last_value", "nth_value"):
        return _value_at(evaluator, scopes, args, name, frames)
    if call.call.filter is not None:
        held = [evaluator.eval(call.call.filter, s) is True for s in scopes]
        return _aggregate_filtered(evaluator, call.call, scopes, held, frames)
    return _aggregate(evaluator, call.call, evaluator.aggregate_inputs(call.call, scopes), frames)


# ------------------------------------------------------------------------------------- frames


def _frames(
    evaluator: Evaluator,
    frame: ast.WindowFrame | None,
    peers: list[int],
    first_peer: Mapping[int, int],
    last_peer: Mapping[int, int],
) -> list[tuple[int, int]]:
    """For each position, its frame as ``(first, last)`` positions (``first > last``: empty)."""
    n = len(peers)
    if frame is None:
        return [(0, last_peer[g]) for g in peers]
    start_offset = _offset(evaluator, frame.start, "starting")
    end_offset = _offset(evaluator, frame.end, "ending")
    if frame.mode == "range" and (start_offset is not None or end_offset is not None):
        raise UnsupportedFeature("RANGE with offset PRECEDING/FOLLOWING is not supported; use ROWS or GROUPS")
    groups = max(peers) + 1 if peers else 0

    def bound(pos: int, b: ast.FrameBound, offset: int | None, end: bool) -> int:
        g = peers[pos]
        if b.kind == "unbounded preceding":
            return 0
        if b.kind == "unbounded following":
            return n - 1
        if frame.mode == "rows":
            step = 0 if offset is None else offset
            return pos - step if b.kind == "preceding" else pos + step
        if b.kind == "current row":  # RANGE and GROUPS: the current row's peers
            return last_peer[g] if end else first_peer[g]
        step = 0 if offset is None else offset
        target = g - step if b.kind == "preceding" else g + step
        if target < 0:
            return -1 if end else 0
        if target >= groups:
            return n - 1 if end else n
        return last_peer[target] if end else first_peer[target]

    out = []
    for pos in range(n):
        first = max(bound(pos, frame.start, start_offset, False), 0)
        last = min(bound(pos, frame.end, end_offset, True), n - 1)
        out.append((first, last))
    return out


def _offset(evaluator: Evaluator, b: ast.FrameBound, which: str) -> int | None:
    """A bound's ``n`` (PRECEDING/FOLLOWING), evaluated once: an integer, not NULL nor negative."""
    if b.offset is None:
        return None
    v = evaluator.eval(b.offset, None)
    if v is None:
        raise invalid_argument(f"frame {which} offset must not be null", "22004")
    if not isinstance(v, int) or isinstance(v, bool):
        raise DatatypeMismatch(f"frame {which} offset must be an integer, not type {value_type(v)}")
    if v < 0:
        raise invalid_argument(f"frame {which} offset must not be negative", "22013")
    return v


def _shown(args: tuple[ast.Expr, ...]) -> str:
    return ", ".join("..." for _ in args)


# ---------------------------------------------------------------------------------- functions


def _ntile(evaluator: Evaluator, scopes: list[Scope], args: tuple[ast.Expr, ...]) -> list[Any]:
    """``ntile(k)``: bucket numbers 1..k, the first ``n % k`` buckets one row larger; ``k`` is
    read on the partition's first row, as PostgreSQL reads it."""
    if len(args) != 1:
        raise UndefinedFunction(f"unknown signature: ntile({_shown(args)})")
    k = evaluator.eval(args[0], scopes[0])
    if k is None:
        return [None] * len(scopes)
    if not isinstance(k, int) or isinstance(k, bool):
        raise DatatypeMismatch(f"argument of ntile must be an integer, not type {value_type(k)}")
    if k <= 0:
        raise invalid_argument("argument of ntile must be greater than zero", "22014")
    n = len(scopes)
    size, extra = divmod(n, k)
    out: list[Any] = []
    for bucket in range(1, k + 1):
        out.extend([bucket] * (size + (1 if bucket <= extra else 0)))
        if len(out) >= n:
            break
    return out[:n]


def _shifted(
    evaluator: Evaluator, scopes: list[Scope], args: tuple[ast.Expr, ...], direction: int
) -> list[Any]:
    """``lag(v [, offset [, default]])`` (direction -1) and ``lead`` (+1): ``v`` on the row
    ``offset`` rows before (after) in the partition, else ``default``, both read on the
    current row."""
    if not 1 <= len(args) <= 3:
        raise UndefinedFunction(f"unknown signature: {'lag' if direction < 0 else 'lead'}({_shown(args)})")
    out: list[Any] = []
    for pos, sc in enumerate(scopes):
        offset = evaluator.eval(args[1], sc) if len(args) > 1 else 1
        if offset is None:
            out.append(None)
            continue
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise DatatypeMismatch(f"offset must be an integer, not type {value_type(offset)}")
        at = pos + direction * offset
        if 0 <= at < len(scopes):
            out.append(evaluator.eval(args[0], scopes[at]))
        else:
            out.append(evaluator.eval(args[2], sc) if len(args) > 2 else None)
    return out


def _value_at(
    evaluator: Evaluator,
    scopes: list[Scope],
    args: tuple[ast.Expr, ...],
    name: str,
    frames: list[tuple[int, int]],
) -> list[Any]:
    """``first_value(v)``, ``last_value(v)``, ``nth_value(v, n)`` of each row's frame (NULL
    when the frame is empty or shorter than ``n``)."""
    if len(args) != (2 if name == "nth_value" else 1):
        raise UndefinedFunction(f"unknown signature: {name}({_shown(args)})")
    out: list[Any] = []
    for pos, (first, last) in enumerate(frames):
        at = first if name == "first_value" else last
        if name == "nth_value":
            nth = evaluator.eval(args[1], scopes[pos])
            if nth is None:
                out.append(None)
                continue
            if not isinstance(nth, int) or isinstance(nth, bool):
                raise DatatypeMismatch(
                    f"argument of nth_value must be an integer, not type {value_type(nth)}"
                )
            if nth <= 0:
                raise invalid_argument("argument of nth_value must be greater than zero", "22016")
            at = first + nth - 1
        out.append(evaluator.eval(args[0], scopes[at]) if first <= at <= last else None)
    return out


def _aggregate(
    evaluator: Evaluator, call: ast.FuncCall, inputs: list[Any], frames: list[tuple[int, int]]
) -> list[Any]:
    """An aggregate over each row's frame: a running total when every frame starts at the
    partition's first row, else each distinct frame folded once."""
    dialect = evaluator.session.dialect
    name = call.name.lower()
    if name in _RUNNING and all(first == 0 for first, _ in frames):
        return _running(name, inputs, frames, dialect)
    done: dict[tuple[int, int], Any] = {}
    out = []
    for first, last in frames:
        if (first, last) not in done:
            done[(first, last)] = reduce_aggregate(
                call, inputs[first : last + 1] if first <= last else [], dialect
            )
        out.append(done[(first, last)])
    return out


def _aggregate_filtered(
    evaluator: Evaluator,
    call: ast.FuncCall,
    scopes: list[Scope],
    held: list[bool],
    frames: list[tuple[int, int]],
) -> list[Any]:
    """An aggregate with FILTER: its inputs are those of the frame's rows the filter holds for."""
    unfiltered = dataclasses.replace(call, filter=None)
    values = evaluator.aggregate_inputs(unfiltered, scopes)
    inputs = [v if keep else None for v, keep in zip(values, held, strict=True)]
    if unfiltered.name.lower() == "count" and (not call.args or isinstance(call.args[0], ast.Star)):
        inputs = [1 if keep else None for keep in held]
    if unfiltered.name.lower() in ("array_agg", "string_agg"):  # these keep NULLs: drop the rows instead
        dialect = evaluator.session.dialect
        return [
            reduce_aggregate(unfiltered, [values[i] for i in range(first, last + 1) if held[i]], dialect)
            for first, last in frames
        ]
    return _aggregate(evaluator, unfiltered, inputs, frames)


def _running(name: str, inputs: list[Any], frames: list[tuple[int, int]], dialect: str) -> list[Any]:
    """``count``/``sum``/``avg``/``min``/``max`` over frames that all start at position 0, in
    one pass: the fold of the first ``last + 1`` inputs for each row (the same values
    :func:`reduce_aggregate` gives, without folding each frame again)."""
    totals: list[Any] = []  # after each input
    count = 0
    total: Any = None
    exact = True
    better: Callable[[Any, Any], bool] = (
        (lambda v, cur: v < cur) if name == "min" else (lambda v, cur: v > cur)
    )
    for v in inputs:
        if v is not None:
            count += 1
            if name in ("sum", "avg"):
                total = v if total is None else exact_add(total, v)
                exact = exact and isinstance(v, int | Decimal)
            elif name in ("min", "max") and (total is None or better(v, total)):
                total = v
        if name == "count":
            totals.append(count)
        elif name == "avg":
            totals.append(None if not count else average(total, count, exact=exact, dialect=dialect))
        elif name == "sum":
            totals.append(widened_sum(total, dialect))
        else:
            totals.append(total)
    empty = 0 if name == "count" else None
    return [totals[last] if last >= 0 else empty for _, last in frames]
