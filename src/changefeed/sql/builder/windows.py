"""Window calls: ``f(..) [FILTER (WHERE ..)] OVER ([PARTITION BY ..] [ORDER BY ..] [frame])``."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from lark import Token

from changefeed.exceptions import UndefinedWindow, UnsupportedFeature, WindowingError, WrongObjectType
from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules
from changefeed.sql.functions import AGGREGATES, WINDOW_FUNCTIONS


class WindowSpec:
    """What ``OVER (..)`` or ``WINDOW w AS (..)`` holds, before it is joined to its call;
    ``base``: the named window it builds on (``OVER (w ORDER BY ..)``)."""

    __slots__ = ("base", "frame", "order_by", "partition_by")

    def __init__(
        self,
        partition_by: tuple[ast.Expr, ...],
        order_by: tuple[ast.OrderItem, ...],
        frame: ast.WindowFrame | None,
        base: str | None = None,
    ) -> None:
        self.partition_by = partition_by
        self.order_by = order_by
        self.frame = frame
        self.base = base


class WindowRules(Rules):
    def window_call(self, c: list[Any]) -> ast.Expr:
        return _window(c[0], c[1])

    def filtered_window_call(self, c: list[Any]) -> ast.Expr:
        call, condition, spec = c
        if isinstance(call, ast.FuncCall) and call.name.casefold() in AGGREGATES:
            call = replace(call, filter=condition)
        elif isinstance(call, ast.FuncCall) and call.name.casefold() in WINDOW_FUNCTIONS:
            raise UnsupportedFeature("FILTER is not implemented for non-aggregate window functions")
        return _window(call, spec)

    def window_spec(self, c: list[Any]) -> WindowSpec:
        partition, order, frame = c
        order_by: tuple[ast.OrderItem, ...] = order.value if isinstance(order, Clause) else ()
        return WindowSpec(tuple(partition or ()), order_by, frame)

    def window_spec_based(self, c: list[Any]) -> WindowSpec:
        base, order, frame = c
        order_by: tuple[ast.OrderItem, ...] = order.value if isinstance(order, Clause) else ()
        return WindowSpec((), order_by, frame, base=base.name)

    def named_window_call(self, c: list[Any]) -> ast.Expr:
        return _window(c[0], WindowSpec((), (), None, base=c[1].name))

    def filtered_named_window_call(self, c: list[Any]) -> ast.Expr:
        return self.filtered_window_call([c[0], c[1], WindowSpec((), (), None, base=c[2].name)])

    def window_clause(self, c: list[tuple[str, WindowSpec]]) -> Clause:
        return Clause("windows", tuple(c))

    def window_def(self, c: list[Any]) -> tuple[str, WindowSpec]:
        return (c[0].name, c[1])

    def window_partition(self, c: list[tuple[ast.Expr, ...]]) -> tuple[ast.Expr, ...]:
        return tuple(c[0])

    def frame_mode(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def frame_from(self, c: list[Any]) -> ast.WindowFrame:
        return _frame(c[0], c[1], ast.FrameBound("current row"))

    def frame_between(self, c: list[Any]) -> ast.WindowFrame:
        return _frame(c[0], c[1], c[2])

    def unbounded_preceding(self, c: list[Any]) -> ast.FrameBound:
        return ast.FrameBound("unbounded preceding")

    def unbounded_following(self, c: list[Any]) -> ast.FrameBound:
        return ast.FrameBound("unbounded following")

    def current_row(self, c: list[Any]) -> ast.FrameBound:
        return ast.FrameBound("current row")

    def offset_preceding(self, c: list[ast.Expr]) -> ast.FrameBound:
        return ast.FrameBound("preceding", c[0])

    def offset_following(self, c: list[ast.Expr]) -> ast.FrameBound:
        return ast.FrameBound("following", c[0])


#: How far along the partition each bound kind lies, for PostgreSQL's order rule on the two ends.
_BOUND_RANK = {
    "unbounded preceding": 0,
    "preceding": 1,
    "current row": 2,
    "following": 3,
    "unbounded following": 4,
}


def _frame(mode: Any, start: ast.FrameBound, end: ast.FrameBound) -> ast.WindowFrame:
    """A frame, refused as PostgreSQL refuses one whose ends cannot be (42P20)."""
    if start.kind == "unbounded following":
        raise WindowingError("frame start cannot be UNBOUNDED FOLLOWING")
    if end.kind == "unbounded preceding":
        raise WindowingError("frame end cannot be UNBOUNDED PRECEDING")
    if _BOUND_RANK[start.kind] > _BOUND_RANK[end.kind] and not (
        start.kind == "following" and end.kind == "following"
    ):
        where = "CURRENT ROW" if start.kind == "current row" else "following row"
        raise WindowingError(f"frame starting from {where} cannot have preceding rows")
    return ast.WindowFrame(mode, start, end)


def _window(call: Any, spec: WindowSpec) -> ast.WindowCall:
    if not isinstance(call, ast.FuncCall):
        raise WrongObjectType("OVER specified, but the expression is not a function call")
    name = call.name.casefold()
    if name not in WINDOW_FUNCTIONS and name not in AGGREGATES:
        raise WrongObjectType(
            f"OVER specified, but {call.name} is not a window function nor an aggregate function"
        )
    if call.distinct:
        raise UnsupportedFeature("DISTINCT is not implemented for window functions")
    return ast.WindowCall(call, spec.partition_by, spec.order_by, spec.frame, window=spec.base)


def named_windows(defs: tuple[tuple[str, WindowSpec], ...]) -> dict[str, WindowSpec]:
    """A WINDOW clause's windows by name, each one built on an earlier one written out
    (PostgreSQL's errors: a name defined twice, an unknown one, a second ORDER BY)."""
    out: dict[str, WindowSpec] = {}
    for name, spec in defs:
        if name in out:
            raise WindowingError(f'window "{name}" is already defined')
        out[name] = _based(spec, out)
    return out


def _based(spec: WindowSpec, windows: dict[str, WindowSpec]) -> WindowSpec:
    if spec.base is None:
        return spec
    base = windows.get(spec.base)
    if base is None:
        raise UndefinedWindow(f'window "{spec.base}" does not exist')
    if base.order_by and spec.order_by:
        raise WindowingError(f'cannot override ORDER BY clause of window "{spec.base}"')
    return WindowSpec(base.partition_by, spec.order_by or base.order_by, spec.frame or base.frame)


def resolve_windows(node: Any, windows: dict[str, WindowSpec]) -> Any:
    """``node`` (a select list, an ORDER BY) with each ``OVER w`` written out from ``windows``;
    a subquery's own windows were written out when it was built."""
    if isinstance(node, ast.WindowCall) and node.window is not None:
        spec = _based(WindowSpec((), node.order_by, node.frame, base=node.window), windows)
        return ast.WindowCall(
            resolve_windows(node.call, windows), spec.partition_by, spec.order_by, spec.frame
        )
    if isinstance(node, tuple):
        return tuple(resolve_windows(x, windows) for x in node)
    if not dataclasses.is_dataclass(node) or isinstance(
        node, type | ast.Subquery | ast.Literal | ast.Ident | ast.Column
    ):
        return node
    changes = {f.name: resolve_windows(getattr(node, f.name), windows) for f in dataclasses.fields(node)}
    return dataclasses.replace(node, **changes)


def names_window(node: Any) -> bool:
    """Whether ``node`` (not its subqueries) has an ``OVER w``."""
    if isinstance(node, ast.WindowCall):
        return node.window is not None
    if isinstance(node, tuple):
        return any(names_window(x) for x in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type | ast.Subquery | ast.Literal | ast.Column):
        return False
    return any(names_window(getattr(node, f.name)) for f in dataclasses.fields(node))
