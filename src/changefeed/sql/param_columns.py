"""Parameter rows of a bulk statement held column by column.

The PostgreSQL endpoint reads a pipelined run of Binds a parameter column at a time (NumPy over
the wire bytes, see ``server/pg/batch.py``) and knows things of a whole column at once: every
value a binary integer, and bounds of them all (its wire type's range); every value text, and a
bound of the longest's length. Handed
to ``Session.execute_many`` as :class:`ParamColumns`, such a run is written without being turned
into row tuples and back into columns, and a column whose facts show every value already fits its
table column (:func:`stored_as_given`) is stored as it is instead of checked value by value. Any
other use (an error's row, the row-by-row fallbacks) sees ordinary rows: :class:`ParamColumns` is
a sequence of row tuples. A column stored as it is goes to the transaction by reference, kept
until its commit: nothing changes a :class:`ParamColumns` once it is handed over.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from changefeed.engine.types import MAX_VALUE_BYTES, Kind, SqlType

#: ColumnFacts.kind: every value a Python ``int`` (never ``bool`` or None).
INTS = "int"
#: ColumnFacts.kind: every value a Python ``str`` (never None).
STRS = "str"


@dataclass(frozen=True, slots=True)
class ColumnFacts:
    """What holds for every value of one parameter column: ``kind`` :data:`INTS` with ``lo <= v
    <= hi`` for each, or :data:`STRS` with ``hi`` at least the longest's length."""

    kind: str
    lo: int
    hi: int

    @staticmethod
    def of(values: Sequence[Any]) -> ColumnFacts | None:
        """The facts of ``values`` found by looking at each (for a few rows; a long column's
        producer knows them without)."""
        if not values:
            return None
        if all(type(v) is int for v in values):
            return ColumnFacts(INTS, min(values), max(values))
        if all(type(v) is str for v in values):
            return ColumnFacts(STRS, 0, max(map(len, values)))
        return None

    def join(self, other: ColumnFacts | None) -> ColumnFacts | None:
        """The facts of this column followed by one with ``other``."""
        if other is None or other.kind != self.kind:
            return None
        return ColumnFacts(self.kind, min(self.lo, other.lo), max(self.hi, other.hi))


def stored_as_given(t: SqlType, facts: ColumnFacts | None) -> bool:
    """Whether every value of a column with ``facts`` is stored in a column of type ``t`` as it
    is: what ``t.storer`` returns for each value unchanged, with no error (a signed integer
    type and integers in its range; unbounded text and strings within the value size limit)."""
    if facts is None:
        return False
    if facts.kind == INTS:
        if t.kind is not Kind.INT:
            return False
        half = 1 << (t.bits - 1)
        return -half <= facts.lo and facts.hi < half
    if facts.kind == STRS:
        return t.kind is Kind.TEXT and t.length is None and not t.ascii and facts.hi <= MAX_VALUE_BYTES // 4
    return False


class ParamColumns(Sequence[tuple[Any, ...]]):
    """``n`` parameter rows as columns (``columns[i][r]`` is row ``r``'s parameter ``i``), each
    with its facts if known. As a sequence: the rows, as tuples."""

    __slots__ = ("columns", "facts", "n")

    def __init__(self, columns: list[list[Any]], facts: list[ColumnFacts | None], n: int) -> None:
        assert len(columns) == len(facts) and all(len(c) == n for c in columns)
        self.columns = columns
        self.facts = facts
        self.n = n

    @staticmethod
    def of_rows(rows: Sequence[Sequence[Any]]) -> ParamColumns:
        """``rows`` (all of one width) as columns, their facts looked at value by value."""
        width = len(rows[0]) if rows else 0
        columns = [[row[i] for row in rows] for i in range(width)]
        return ParamColumns(columns, [ColumnFacts.of(c) for c in columns], len(rows))

    @staticmethod
    def concat(parts: Sequence[ParamColumns]) -> ParamColumns:
        """The rows of ``parts`` (all of one width), one after another."""
        if len(parts) == 1:
            return parts[0]
        width = len(parts[0].columns)
        columns: list[list[Any]] = [[] for _ in range(width)]
        facts: list[ColumnFacts | None] = list(parts[0].facts)
        for part in parts:
            for i in range(width):
                columns[i].extend(part.columns[i])
        for part in parts[1:]:
            facts = [f.join(g) if f is not None else None for f, g in zip(facts, part.facts, strict=True)]
        return ParamColumns(columns, facts, sum(p.n for p in parts))

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, i: slice) -> ParamColumns: ...
    def __getitem__(self, i: int | slice) -> tuple[Any, ...] | ParamColumns:
        if isinstance(i, slice):
            columns = [c[i] for c in self.columns]
            n = len(range(*i.indices(self.n)))
            # A part of a column keeps its whole's facts: they hold for every value of it.
            return ParamColumns(columns, list(self.facts), n)
        if not -self.n <= i < self.n:
            raise IndexError("parameter row out of range")
        return tuple(c[i] for c in self.columns)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return zip(*self.columns, strict=True) if self.columns else iter([()] * self.n)
