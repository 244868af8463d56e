"""CQL counter columns (``c counter``): ``UPDATE t SET c = c + 1 WHERE ..`` adds to the value
(a missing one counts as 0), as ScyllaDB's counters do; a counter is never set, a counter table
never takes an ``INSERT``, and ``SET w = w + 1`` on any other column is ScyllaDB's
``Invalid operation`` error (not a missing column).

A counter here is a 64-bit integer read and written in the statement's transaction, so its
increments are exact and serialised like any other write; ScyllaDB's counters are eventually
consistent shards, which a single node does not need.
"""

from __future__ import annotations

from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator

__all__ = ["check_insert", "is_counter", "step"]


def is_counter(c: ColumnSchema) -> bool:
    return c.type.name.lower() == "counter"


def check_insert(schema: TableSchema) -> None:
    """ScyllaDB's refusal of an ``INSERT`` into a table with counters."""
    if any(is_counter(c) for c in schema.columns):
        raise InvalidStatement("INSERT statements are not allowed on counter tables, use UPDATE instead")


def step(c: ColumnSchema, e: ast.Expr, evaluator: Evaluator) -> int | None:
    """For ``SET c = c + n`` / ``c = c - n`` on a counter, the signed step; None for a plain
    assignment to another column (evaluated as before). Errors as ScyllaDB words them."""
    own = (
        isinstance(e, ast.BinaryOp)
        and e.op in ("+", "-")
        and isinstance(e.left, ast.Column)
        and evaluator.session.ident(e.left.name) == c.name
    )
    if not is_counter(c):
        if own:
            assert isinstance(e, ast.BinaryOp)
            shown = _shown(evaluator.eval(e.right, None))
            raise InvalidStatement(
                f"Invalid operation ({c.name} = {c.name} {e.op} {shown}) for non counter column {c.name}"
            )
        return None
    if not own:
        raise InvalidStatement(
            f"Cannot set the value of counter column {c.name} (counters can only be incremented/decremented, not set)"
        )
    assert isinstance(e, ast.BinaryOp)
    n = evaluator.eval(e.right, None)
    if n is None:
        raise InvalidStatement(f"Invalid null value for counter increment/decrement of column {c.name}")
    if not isinstance(n, int) or isinstance(n, bool):
        raise InvalidStatement(f"Invalid counter increment for column {c.name}: {_shown(n)} is not a bigint")
    return n if e.op == "+" else -n


def _shown(v: Any) -> str:
    return "null" if v is None else repr(v) if isinstance(v, str) else str(v)
