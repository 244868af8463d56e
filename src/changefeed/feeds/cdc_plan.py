"""A checked CockroachDB CDC query (``CREATE CHANGEFEED .. AS SELECT``), as the feed spec stores
it and the encoders evaluate it.

:class:`CdcQuery` holds the target table, the projection (:class:`OutputColumn`, in order, named
as CockroachDB names them) and the predicate, each a typed expression tree of :class:`PExpr`
nodes whose types are the engine's :class:`~changefeed.engine.types.SqlType` (so the encoders
render a projected value exactly as they render a column of that type). The tree is plain data:
it round-trips through JSON with the spec, and both evaluators
(:mod:`changefeed.formats.cdc_eval`: the Python/Arrow face and the Spark column face) read the
same tree.

Node kinds (``PExpr.op``):

=========  ================================================================================
``lit``    a constant; ``value`` in the evaluators' value domain, JSON-encoded (see
           :func:`lit_value`)
``col``    a column of the event's row (``value`` the column id); ``prev`` a column of the
           previous row (``cdc_prev``), NULL when there is none
``prevrow``  the whole previous row (``cdc_prev``) as a JSON object, NULL for an insert
``meta``   event data: ``mvcc`` (``crdb_internal_mvcc_timestamp``), ``prev_mvcc``
           (``(cdc_prev).crdb_internal_mvcc_timestamp``: 0 when there is a previous row, as
           in CockroachDB, whose rangefeed does not carry the previous value's timestamp;
           NULL when there is none),
           ``op`` (``event_op()``), ``schema_ts`` (``event_schema_timestamp()``),
           ``creation_ts`` (``changefeed_creation_timestamp()``), ``event_tz`` (the
           event's MVCC timestamp as TIMESTAMPTZ: ``statement_timestamp()``)
``fn``     a function or operator of :mod:`changefeed.formats.cdc_functions` (``value`` its
           name), applied to ``args``
=========  ================================================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from changefeed.engine.types import Kind, SqlType

# ---------------------------------------------------------------------------- the types CDC queries use
INT8 = SqlType(Kind.INT, "INT8")
FLOAT8 = SqlType(Kind.FLOAT, "FLOAT8")
DECIMAL = SqlType(Kind.DECIMAL, "DECIMAL")
STRING = SqlType(Kind.TEXT, "STRING")
BOOL = SqlType(Kind.BOOL, "BOOL")
BYTES = SqlType(Kind.BYTES, "BYTES")
DATE = SqlType(Kind.DATE, "DATE")
TIMESTAMP = SqlType(Kind.TIMESTAMP, "TIMESTAMP", zoned=False)
TIMESTAMPTZ = SqlType(Kind.TIMESTAMP, "TIMESTAMPTZ")
INTERVAL = SqlType(Kind.INTERVAL, "INTERVAL")
UUID = SqlType(Kind.UUID, "UUID")
JSONB = SqlType(Kind.JSON, "JSONB")
TIME = SqlType(Kind.TIME, "TIME")
INET = SqlType(Kind.INET, "INET")
#: An HLC timestamp as a decimal (``<wall ns>.<logical, 10 digits>``): precision 30, scale 10.
HLC_DECIMAL = SqlType(Kind.DECIMAL, "DECIMAL", precision=30, scale=10)
#: JSON text the evaluators already print as CockroachDB does (keys sorted, ``", "``/``": "``):
#: the encoders pass it through instead of re-printing it.
JSONB_CANONICAL = SqlType(Kind.JSON, "JSONB", length=-1)

# ---------------------------------------------------------------------------- node kinds
LIT = "lit"
COL = "col"
PREV = "prev"
PREVROW = "prevrow"
META = "meta"
FN = "fn"

META_MVCC = "mvcc"
META_PREV_MVCC = "prev_mvcc"
META_OP = "op"
META_SCHEMA_TS = "schema_ts"
META_CREATION_TS = "creation_ts"
META_EVENT_TZ = "event_tz"


def is_canonical_json(t: SqlType) -> bool:
    return t.kind is Kind.JSON and t.length == -1


@dataclass(frozen=True, slots=True)
class PExpr:
    """A typed expression node (see the module docstring for ``op``)."""

    op: str
    type: SqlType
    value: Any = None
    args: tuple[PExpr, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "type": self.type.to_json()}
        if self.value is not None:
            d["value"] = self.value
        if self.args:
            d["args"] = [a.to_json() for a in self.args]
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> PExpr:
        return PExpr(
            op=d["op"],
            type=SqlType.from_json(d["type"]),
            value=d.get("value"),
            args=tuple(PExpr.from_json(a) for a in d.get("args", ())),
        )

    def walk(self) -> Iterator[PExpr]:
        yield self
        for a in self.args:
            yield from a.walk()


def lit(value: Any, t: SqlType) -> PExpr:
    """A constant of type ``t``; ``value`` in the evaluators' domain (:func:`lit_value`)."""
    return PExpr(LIT, t, lit_value(value, t))


def lit_value(value: Any, t: SqlType) -> Any:
    """A domain value as JSON data: DECIMAL as its text, BYTES as hex, everything else as is
    (INT int, FLOAT float, STRING/UUID/JSONB text, BOOL, DATE days, TIMESTAMP/INTERVAL/TIME
    microseconds)."""
    if value is None:
        return None
    if t.kind is Kind.DECIMAL:
        return str(value)
    if t.kind is Kind.BYTES:
        return bytes(value).hex()
    if t.kind is Kind.FLOAT and value != value:
        return "NaN"
    if t.kind is Kind.FLOAT and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return value


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One member of the projection: its (unique) name and its expression."""

    name: str
    expr: PExpr

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "expr": self.expr.to_json()}


@dataclass(frozen=True, slots=True)
class CdcQuery:
    """A checked CDC query over one table."""

    text: str  # the SELECT clause as written
    table_id: int
    columns: tuple[OutputColumn, ...]
    where: PExpr | None = None
    #: the query reads the previous row (``cdc_prev``): CockroachDB turns ``diff`` on for it
    uses_prev: bool = False
    family: str | None = None  # the column family a multi-family table's query reads
    creation_wall: int = 0  # changefeed_creation_timestamp()
    creation_logical: int = 0
    cluster_id: str = ""  # crdb_internal.cluster_id()
    notices: tuple[str, ...] = field(default=(), compare=False)

    def exprs(self) -> Iterator[PExpr]:
        for c in self.columns:
            yield c.expr
        if self.where is not None:
            yield self.where

    def referenced(self, op: str) -> set[Any]:
        """Values of the nodes of kind ``op`` anywhere in the query (column ids, meta names)."""
        return {n.value for e in self.exprs() for n in e.walk() if n.op == op}

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "table_id": self.table_id,
            "columns": [c.to_json() for c in self.columns],
            "where": None if self.where is None else self.where.to_json(),
            "uses_prev": self.uses_prev,
            "family": self.family,
            "creation_wall": self.creation_wall,
            "creation_logical": self.creation_logical,
            "cluster_id": self.cluster_id,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CdcQuery:
        return CdcQuery(
            text=d["text"],
            table_id=d["table_id"],
            columns=tuple(OutputColumn(c["name"], PExpr.from_json(c["expr"])) for c in d["columns"]),
            where=None if d.get("where") is None else PExpr.from_json(d["where"]),
            uses_prev=d.get("uses_prev", False),
            family=d.get("family"),
            creation_wall=d.get("creation_wall", 0),
            creation_logical=d.get("creation_logical", 0),
            cluster_id=d.get("cluster_id", ""),
        )


__all__ = [
    "BOOL",
    "BYTES",
    "COL",
    "DATE",
    "DECIMAL",
    "FLOAT8",
    "FN",
    "HLC_DECIMAL",
    "INET",
    "INT8",
    "INTERVAL",
    "JSONB",
    "JSONB_CANONICAL",
    "LIT",
    "META",
    "META_CREATION_TS",
    "META_EVENT_TZ",
    "META_MVCC",
    "META_OP",
    "META_PREV_MVCC",
    "META_SCHEMA_TS",
    "PREV",
    "PREVROW",
    "STRING",
    "TIME",
    "TIMESTAMP",
    "TIMESTAMPTZ",
    "UUID",
    "CdcQuery",
    "OutputColumn",
    "PExpr",
    "is_canonical_json",
    "lit",
    "lit_value",
]
