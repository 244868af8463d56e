"""The statement state of one connection: prepared statements, portals, the running query, and
the batch of pipelined Executes waiting to run together (see ``batch.py``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from changefeed.connection import Result
from changefeed.server.pg.commands import Command
from changefeed.server.pg.copy_spec import CopySpec
from changefeed.server.pg.normalise import Template
from changefeed.sql import ast
from changefeed.sql.param_columns import ParamColumns
from changefeed.sql.statements.point import PointRead


@dataclass
class Prepared:
    sql: str
    kind: str  # empty | command | catalog | engine | stream | copy
    stmts: list[ast.Statement] = field(default_factory=list)
    command: Command | None = None
    param_oids: list[int] = field(default_factory=list)
    inline: bool = False  # short: run on the event loop (see inline.py)
    #: Not short, but an INSERT of literals and parameters only (``inline.bulk_insert``).
    bulk_insert: bool = False
    #: kind "copy": the COPY statement (``copy_spec.CopySpec``).
    copy: CopySpec | None = None
    #: A compiled point read of the statement (``sql.statements.point``), once planned.
    point: PointRead | None = None
    planned: bool = False
    #: A statement of the simple protocol taken from a normalised template: ``stmts`` is the
    #: template (``$n`` for the constants) and ``values`` the constants, bound when needed.
    template: Template | None = None
    values: tuple[Any, ...] = ()
    #: The result column OIDs a Describe of the statement told the client (None: not described).
    row_oids: tuple[int, ...] | None = None

    def retyped(self, oids: Sequence[int]) -> Prepared:
        """This statement with parameters of the types ``oids`` (a Parse or Describe that
        declares them): all it is, without a plan made for other parameter types."""
        return replace(self, param_oids=list(oids), point=None, planned=False, row_oids=None)

    def described_as(self, row_oids: tuple[int, ...]) -> Prepared:
        """This statement, its result columns described to the client as ``row_oids``."""
        return replace(self, row_oids=row_oids)


@dataclass(frozen=True)
class RunShape:
    """What every Bind of a pipelined run of one statement repeats (``batch.scan_run`` takes such
    runs straight from the buffer): its bytes up to and including the parameter count (unnamed
    portal, statement name, parameter format codes), its result format codes at the end, and how
    each parameter is decoded. ``bind_head`` and ``param_formats`` are the first Bind's portal's
    (what :class:`Portal` keeps of its Bind), handed on to the portal the run leaves."""

    bind_head: bytes
    param_formats: tuple[int, ...]
    head: bytes
    tail: bytes
    oids: tuple[int, ...]
    binary: tuple[bool, ...]
    result_formats: tuple[int, ...]


class BatchRows:
    """The parameter rows of a batch in the order of the messages: a run the scan took column-wise
    kept as its columns (:class:`ParamColumns`), rows taken message by message as they came."""

    __slots__ = ("n", "parts")

    def __init__(self, rows: Sequence[Sequence[Any]] = ()) -> None:
        self.parts: list[ParamColumns | list[Sequence[Any]]] = []
        self.n = 0
        for row in rows:
            self.append(row)

    def __len__(self) -> int:
        return self.n

    def append(self, row: Sequence[Any]) -> None:
        last = self.parts[-1] if self.parts else None
        if not isinstance(last, list):
            last = []
            self.parts.append(last)
        last.append(row)
        self.n += 1

    def add(self, run: ParamColumns) -> None:
        self.parts.append(run)
        self.n += len(run)

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return itertools.chain.from_iterable(self.parts)

    def __getitem__(self, i: int) -> Sequence[Any]:
        if i < 0:
            i += self.n
        for part in self.parts:
            if i < len(part):
                return part[i]
            i -= len(part)
        raise IndexError("batch row out of range")

    def since(self, start: int) -> Sequence[Sequence[Any]]:
        """The rows from ``start`` on, for ``Session.execute_many``: as one :class:`ParamColumns`
        when some came as columns (the others joined to them), else as the list they are."""
        parts: list[ParamColumns | list[Sequence[Any]]] = []
        for part in self.parts:
            if start < len(part):
                parts.append(part[start:] if start else part)
            start = max(start - len(part), 0)
        if all(isinstance(p, list) for p in parts):
            return [row for p in parts for row in p]
        widths = {len(p.columns) for p in parts if isinstance(p, ParamColumns)}
        widths.update(len(row) for p in parts if isinstance(p, list) for row in p)
        if len(widths) != 1:
            return [row for p in parts for row in p]  # Binds of other widths: as rows
        return ParamColumns.concat(
            [p if isinstance(p, ParamColumns) else ParamColumns.of_rows(p) for p in parts]
        )


@dataclass
class Batch:
    """Executes of one statement waiting to run together (``batch.flush_batch``), with the
    replies due before each one's CommandComplete (BindComplete, NoData), held back so that the
    replies go out in the order of the messages."""

    prepared: Prepared
    #: Each Execute's parameters, decoded, in the order of the messages.
    rows: BatchRows = field(default_factory=BatchRows)
    #: Per row: the replies due before its CommandComplete (its BindComplete, NoData).
    pre: list[bytes] = field(default_factory=list)
    #: Replies of the messages after the last Execute (a Bind, a Describe of the next row).
    pending: list[bytes] = field(default_factory=list)
    #: The shape of the first row's Bind (None: no fast path).
    shape: RunShape | None = None
    #: Rows handed to the engine so far, parts started, the part in flight and its first row.
    executed: int = 0
    chunks: int = 0
    inflight: asyncio.Future[int] | None = None
    inflight_from: int = 0


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]
    result: Result | None = None
    pos: int = 0
    described: bool = False
    #: The Bind that made it, up to its parameter count (portal, statement, parameter formats).
    bind_head: bytes = b""
    param_formats: tuple[int, ...] = ()


_query_ids = itertools.count(1)
_QUERY_ID_BASE = uuid.uuid4().int >> 64  # per server process; CockroachDB ids are 128-bit hex too


def new_query_id() -> str:
    """A query's id for SHOW QUERIES / CANCEL QUERY: unique per server, 32 hex digits, without a
    random read per statement (``uuid4`` costs a ``getrandom`` system call each time)."""
    return f"{_QUERY_ID_BASE:016x}{next(_query_ids):016x}"


@dataclass
class Running:
    query_id: str
    sql: str
    start: dt.datetime
    phase: str = "executing"
