"""The statement nodes only CQL has (``changefeed.sql.ast`` re-exports them with the others):
``INSERT .. JSON`` and a SELECT with what only CQL's has (``JSON``, ``GROUP BY``
of a key prefix, ``PER PARTITION LIMIT``, ``ttl(..)``/``writetime(..)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from changefeed.sql.ast_expressions import Expr, FuncCall, Pos, QName

if TYPE_CHECKING:
    from changefeed.sql.ast import Select


@dataclass(frozen=True, slots=True)
class InsertJson:
    """``INSERT INTO t JSON '{..}' [DEFAULT NULL|UNSET] [IF NOT EXISTS] [USING ..]``: the object's
    members are the columns (a name in double quotes keeps its case); with ``DEFAULT NULL`` (the
    default) the columns it leaves out are written null, with ``DEFAULT UNSET`` left alone."""

    table: QName
    json: Expr
    default_unset: bool = False
    if_not_exists: bool = False
    ttl: Expr | None = None
    timestamp: Expr | None = None
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CqlSelect:
    """A CQL SELECT with ``JSON``, ``GROUP BY``, ``PER PARTITION LIMIT n`` or ``ttl()``/``writetime()``
    in its select list: ``select`` is the rest of it (its ``group_by`` included). ``json`` answers
    each row as one ``[json]`` text column, which the endpoint formats with the columns' CQL types."""

    select: Select
    json: bool = False
    per_partition_limit: Expr | None = None
    pos: Pos = field(default=Pos(), compare=False)

    @property
    def table(self) -> QName | None:
        return self.select.table

    @property
    def where(self) -> Expr | None:
        return self.select.where


#: CQL's selection functions of a cell's metadata (``sql.statements.cql_cells``).
CELL_FUNCTIONS = frozenset({"ttl", "writetime"})


def calls_cell_function(e: Expr) -> bool:
    """Whether ``e`` calls ``ttl``/``writetime``, itself or in a function's arguments."""
    if isinstance(e, FuncCall):
        return e.name.lower() in CELL_FUNCTIONS or any(calls_cell_function(a) for a in e.args)
    return False
