"""Joins of a SELECT's tables: ``[INNER] JOIN .. ON``, ``LEFT|RIGHT|FULL [OUTER] JOIN .. ON``, ``CROSS JOIN``
and ``FROM a, b``, left-deep in the order written.

Each table is read whole (its SELECT privilege checked as for a single-table SELECT); an ``ON``
with an equality between a column of the tables joined so far and one of the new table is a
hash join on it (the rest of the ``ON`` is then checked on the candidates), anything else a
nested loop. The result is a relation whose columns answer to ``alias.column`` and, when one
table alone has it, to ``column``; a name two tables have is ambiguous (``42702``), as in
PostgreSQL and CockroachDB. ``SELECT *`` shows every table's columns under their own names.

``JOIN .. USING (a, b)`` joins on ``left.a = right.a AND ..`` and makes each such pair one column:
the bare name ``a`` is that column (the left's value, the right's for a RIGHT JOIN, the first
that is not NULL for a FULL JOIN), ``SELECT *`` shows it once, first, and ``l.a``/``r.a`` still
name each side's. ``NATURAL JOIN`` is ``USING`` the names both sides have.

A set-returning function joined after other tables may name their columns in its arguments
(PostgreSQL's implicitly LATERAL function calls, :func:`join_lateral`): it runs once for each
row joined so far, in an INNER, CROSS or LEFT join."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from changefeed.engine.types import SqlType
from changefeed.exceptions import AmbiguousColumn, DuplicateAlias, InvalidColumnReference, UndefinedColumn
from changefeed.sql import ast
from changefeed.sql.evaluator import AMBIGUOUS, Evaluator, RowMap, Scope, conjuncts

__all__ = ["USING_PREFIX", "Joined", "join", "join_lateral", "natural_names", "start"]


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
    #: Columns whose bare name is another's: the two sides of a ``USING`` column.
    hidden: frozenset[int] = frozenset()
    #: ``SELECT *``'s columns (their ``columns`` entries) when not all of them in order.
    star: list[str] | None = None


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
    using: Sequence[str] | None = None,
) -> Joined:
    """``left`` joined to the table ``alias`` (``kind``: inner, left, right, full or cross),
    on ``on`` or on the columns ``using`` names (see the module)."""
    qualified = [f"{alias}.{c}" for c in columns]
    if any(q in left.names for q in qualified):
        raise DuplicateAlias(f'table name "{alias}" specified more than once')
    pairs_using = _using_pairs(left, columns, using) if using is not None else []
    if using is not None:
        on = _equalities(left, qualified, pairs_using)
    shape = _joined(
        left.columns + qualified, left.labels + list(columns), left.types + list(types), [], left.hidden
    )
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
    if using is None:
        star = None if left.star is None else left.star + qualified
        return Joined(shape.columns, shape.labels, shape.types, out, shape.names, shape.hidden, star)
    return _merged(left, shape, out, kind, pairs_using, width)


def join_lateral(
    left: Joined,
    kind: str,
    alias: str,
    columns: Sequence[str],
    types: Sequence[SqlType | None],
    produce: Callable[[Scope], list[tuple[Any, ...]]],
    on: ast.Expr | None,
    evaluator: Evaluator,
    using: Sequence[str] | None = None,
) -> Joined:
    """``left`` joined to rows that ``produce`` makes for each of its rows (seen as ``Scope``),
    as :func:`join` joins a table, in an INNER, CROSS or LEFT join (42P10 for RIGHT and FULL, as
    PostgreSQL's)."""
    if kind in ("right", "full"):
        raise InvalidColumnReference(
            f"invalid reference to FROM-clause entry in a {kind.upper()} JOIN: the combining JOIN "
            "type must be INNER or LEFT for a LATERAL reference"
        )
    lower = {k.lower(): i for k, i in left.names.items()}
    shape = join(replace(left, rows=[]), kind, alias, columns, types, [], on, evaluator, using)
    rows: list[tuple[Any, ...]] = []
    if using is not None:  # the USING columns' merging: join's, a row at a time
        for lrow in left.rows:
            right = produce(Scope(RowMap(lrow, left.names, lower)))
            one = replace(left, rows=[lrow])
            rows.extend(join(one, kind, alias, columns, types, right, on, evaluator, using).rows)
        return replace(shape, rows=rows)
    every = {k.lower(): i for k, i in shape.names.items()}
    nulls = (None,) * len(columns)
    for lrow in left.rows:
        right = produce(Scope(RowMap(lrow, left.names, lower)))
        hit = [
            lrow + r
            for r in right
            if on is None or evaluator.eval(on, Scope(RowMap(lrow + r, shape.names, every))) is True
        ]
        rows.extend(hit)
        if kind == "left" and not hit:
            rows.append(lrow + nulls)
    return replace(shape, rows=rows)


def _using_pairs(left: Joined, columns: Sequence[str], using: Sequence[str]) -> list[tuple[str, int, int]]:
    """(name, left position, right column index) of each ``USING`` column; ``using`` empty with
    NATURAL's names already found by the caller."""
    out: list[tuple[str, int, int]] = []
    for name in using:
        at = _bare(left, name)
        if at is None:
            raise UndefinedColumn(f'column "{name}" specified in USING clause does not exist in left table')
        if at == AMBIGUOUS:
            raise AmbiguousColumn(f'common column name "{name}" appears more than once in left table')
        right = [i for i, c in enumerate(columns) if c == name]
        if not right:
            raise UndefinedColumn(f'column "{name}" specified in USING clause does not exist in right table')
        if len(right) > 1:
            raise AmbiguousColumn(f'common column name "{name}" appears more than once in right table')
        out.append((name, at, right[0]))
    return out


def natural_names(left: Joined, columns: Sequence[str]) -> list[str]:
    """The names ``NATURAL JOIN`` joins on: the right side's that the left side has bare."""
    return [c for c in columns if _bare(left, c) is not None]


def _bare(left: Joined, name: str) -> int | None:
    return left.names.get(name)


def _equalities(left: Joined, qualified: Sequence[str], pairs: list[tuple[str, int, int]]) -> ast.Expr | None:
    """``l.a = r.a AND ..`` over the columns' qualified names (a hash join on the first)."""
    on: ast.Expr | None = None
    for _, at, ri in pairs:
        lt, _, lc = left.columns[at].rpartition(".")
        rt, _, rc = qualified[ri].rpartition(".")
        eq = ast.BinaryOp(
            "=",
            ast.Column(ast.Ident(lc, True), ast.Ident(lt, True)),
            ast.Column(ast.Ident(rc, True), ast.Ident(rt, True)),
        )
        on = eq if on is None else ast.BinaryOp("AND", on, eq)
    return on


def _merged(
    left: Joined,
    shape: Joined,
    rows: list[tuple[Any, ...]],
    kind: str,
    pairs: list[tuple[str, int, int]],
    width: int,
) -> Joined:
    """The joined rows with one column more for each ``USING`` pair, which its bare name and
    ``SELECT *`` then show (first) instead of either side's."""
    picks = [(at, width + ri) for _, at, ri in pairs]

    def merged(row: tuple[Any, ...]) -> tuple[Any, ...]:
        vals = []
        for la, ra in picks:
            first, second = (row[ra], row[la]) if kind == "right" else (row[la], row[ra])
            vals.append(first if first is not None else second)
        return row + tuple(vals)

    names = [name for name, _, _ in pairs]
    keys = [f"{USING_PREFIX}{n}" for n in names]
    sides = {at for at, _ in picks} | {ra for _, ra in picks}
    columns = shape.columns + keys
    labels = shape.labels + names
    types = shape.types + [shape.types[at] for at, _ in picks]
    hidden = shape.hidden | sides
    joined = _joined(columns, labels, types, [merged(r) for r in rows], hidden)
    at_left = {c: i for i, c in enumerate(left.columns)}
    shown = [c for c in (left.star or left.columns) if at_left[c] not in sides]
    shown += [c for i, c in enumerate(shape.columns[width:], start=width) if i not in sides]
    return Joined(
        joined.columns, joined.labels, joined.types, joined.rows, joined.names, hidden, keys + shown
    )


#: The qualifier of a USING column's key in ``Joined.columns`` (no alias can be empty).
USING_PREFIX = "."


def _joined(
    columns: list[str],
    labels: list[str],
    types: list[SqlType | None],
    rows: list[tuple[Any, ...]],
    hidden: frozenset[int] = frozenset(),
) -> Joined:
    names: dict[str, int] = {q: i for i, q in enumerate(columns) if not q.startswith(USING_PREFIX)}
    for i, label in enumerate(labels):
        if i not in hidden:
            names[label] = AMBIGUOUS if label in names and names[label] != i else i
    return Joined(columns, labels, types, rows, names, hidden)


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
