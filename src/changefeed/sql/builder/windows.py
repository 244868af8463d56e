"""Window calls: ``f(..) [FILTER (WHERE ..)] OVER ([PARTITION BY ..] [ORDER BY ..] [frame])``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lark import Token

from changefeed.exceptions import UnsupportedFeature, WindowingError, WrongObjectType
from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules
from changefeed.sql.functions import AGGREGATES, WINDOW_FUNCTIONS


class WindowSpec:
    """What ``OVER (..)`` holds, before it is joined to its call."""

    __slots__ = ("frame", "order_by", "partition_by")

    def __init__(
        self,
        partition_by: tuple[ast.Expr, ...],
        order_by: tuple[ast.OrderItem, ...],
        frame: ast.WindowFrame | None,
    ) -> None:
        self.partition_by = partition_by
        self.order_by = order_by
        self.frame = frame


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
    return ast.WindowCall(call, spec.partition_by, spec.order_by, spec.frame)
