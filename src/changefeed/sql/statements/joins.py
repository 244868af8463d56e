"""Joins of a SELECT's tables: ``[INNER] JOIN .. ON``, ``LEFT|RIGHT|FULL [OUTER] JOIN .. ON``, ``CROSS JOIN``
and ``FROM a, b``, left-deep in the order written.

Each table is read whole (its SELECT privilege checked as for a single-table SELECT); an ``ON``
with an equality between a column of the tables joined so far and one of the new table is a
hash join on it (the rest of the ``ON`` is then checked on the candidates), anything else a
nested loop. The result is a relation whose columns answer to ``alias.column`` and, when one
table alone has it, to ``column``; a name two tables have is ambiguous (``42702``), as in
PostgreSQL and CockroachDB. ``SELECT *`` shows every table's columns under their own names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from changefeed.engine.types import SqlType
from changefeed.exceptions import DuplicateAlias
from changefeed.sql import ast
from changefeed.sql.evaluator import AMBIGUOUS, Evaluator, RowMap, Scope, conjuncts

__all__ = ["Joined", "join", "start"]


@dataclass(frozen=True)
class Joined:
    """Tables joined so far: their rows end to end."""

    #: ``alias.column`` for each column, in order.
    columns: list[str]
    #: The column's own name, what ``SELECT *`` shows.
    labels: list[str]
    types: list[SqlType | None]
    rows: list[tuple[Any, ...]]
    #: Every name a column answers to: qualified, and bare when one table alone has it
    #: (:data:`~changefeed.sql.evaluator.AMBIGUOUS` otherwise).
    names: dict[str, int]


def start(
    alias: str, columns: Sequence[str], types: Sequence[SqlType | None], rows: list[tuple[Any, ...]]
) -> Joined:
    """The first table of a FROM, known as ``alias``."""
    return _joined([f"{alias}.{c}" for c in columns], list(columns), list(types), rows)


def join(
    left: Joined,
    kind: str,
    alias: str,
    columns: Sequence[str],
    types: Sequence[SqlType | None],
    right: list[tuple[Any, ...]],
    on: ast.Expr | None,
    evaluator: Evaluator,
) -> Joined:
    """``left`` joined to the table ``alias`` (``kind``: inner, left, right, full or cross)."""
    qualified = [f"{alias}.{c}" for c in columns]
    if any(q in left.names for q in qualified):
        raise DuplicateAlias(f'table name "{alias}" specified more than once')
    shape = _joined(left.columns + qualified, left.labels + list(columns), left.types + list(types), [])
    lower = {k.lower(): i for k, i in shape.names.items()}

    def matches(row: tuple[Any, ...]) -> bool:
        return on is None or evaluator.eval(on, Scope(RowMap(row, shape.names, lower))) is True

    width = len(left.columns)
    pairs = _hash_key(on, shape.names, width) if on is not None else None
    candidates: Callable[[tuple[Any, ...]], list[int]]
    if pairs is not None:
        lpos, rpos = pairs
        by_key: dict[Any, list[int]] = {}
        for at, r in enumerate(right):  # equal numbers hash alike in Python (2, 2.0, Decimal(2))
            k = r[rpos - width]
            if k is not None:
                by_key.setdefault(k, []).append(at)

        def candidates(lrow: tuple[Any, ...]) -> list[int]:
            k = lrow[lpos]
            return by_key.get(k, []) if k is not None else []
    else:
        every = list(range(len(right)))

        def candidates(lrow: tuple[Any, ...]) -> list[int]:
            return every

    out: list[tuple[Any, ...]] = []
    matched: set[int] = set()
    for lrow in left.rows:
        hit = [at for at in candidates(lrow) if matches(lrow + right[at])]
        out.extend(lrow + right[at] for at in hit)
        if kind in ("left", "full") and not hit:
            out.append(lrow + (None,) * len(columns))
        matched.update(hit)
    if kind in ("right", "full"):  # the right rows no left row matched, with NULLs for the left's columns
        nulls = (None,) * width
        out.extend(nulls + r for at, r in enumerate(right) if at not in matched)
    return Joined(shape.columns, shape.labels, shape.types, out, shape.names)


def _joined(
    columns: list[str], labels: list[str], types: list[SqlType | None], rows: list[tuple[Any, ...]]
) -> Joined:
    names: dict[str, int] = {q: i for i, q in enumerate(columns)}
    for i, label in enumerate(labels):
        names[label] = AMBIGUOUS if label in names and names[label] != i else i
    return Joined(columns, labels, types, rows, names)


def _hash_key(on: ast.Expr, names: dict[str, int], width: int) -> tuple[int, int] | None:
    """(left position, right position) of an ``l = r`` conjunct of ``on`` that compares a
    column of the left side with one of the right, if there is one."""
    for c in conjuncts(on):
        if not (isinstance(c, ast.BinaryOp) and c.op == "=" and isinstance(c.left, ast.Column)):
            continue
        if not isinstance(c.right, ast.Column):
            continue
        a, b = _position(c.left, names), _position(c.right, names)
        if a is None or b is None:
            continue
        if a < width <= b:
            return a, b
        if b < width <= a:
            return b, a
    return None


def _position(col: ast.Column, names: dict[str, int]) -> int | None:
    key = f"{col.table.name}.{col.name.name}" if col.table is not None else col.name.name
    at = names.get(key)
    if at is None:
        at = next((i for k, i in names.items() if k.lower() == key.lower()), None)
    return None if at is None or at == AMBIGUOUS else at
