"""The statement state of one connection: prepared statements, portals, the running query, and
the batch of pipelined Executes waiting to run together (see ``batch.py``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from changefeed.connection import Result
from changefeed.server.pg.commands import Command
from changefeed.server.pg.normalise import Template
from changefeed.sql import ast
from changefeed.sql.statements.point import PointRead


@dataclass
class Prepared:
    sql: str
    kind: str  # empty | command | catalog | engine | stream
    stmts: list[ast.Statement] = field(default_factory=list)
    command: Command | None = None
    param_oids: list[int] = field(default_factory=list)
    inline: bool = False  # short: run on the event loop (see inline.py)
    #: A compiled point read of the statement (``sql.statements.point``), once planned.
    point: PointRead | None = None
    planned: bool = False
    #: A statement of the simple protocol taken from a normalised template: ``stmts`` is the
    #: template (``$n`` for the constants) and ``values`` the constants, bound when needed.
    template: Template | None = None
    values: tuple[Any, ...] = ()


@dataclass
class Batch:
    """Executes of one statement waiting to run together (``PgSession.flush_batch``), with the
    replies due before each one's CommandComplete (BindComplete, NoData), held back so that the
    replies go out in the order of the messages."""

    prepared: Prepared
    #: Each Execute's parameters; None for a row taken raw by ``batch.scan_run`` (in ``raw``).
    rows: list[list[Any] | None] = field(default_factory=list)
    replies: list[bytes] = field(default_factory=list)
    pending: list[bytes] = field(default_factory=list)
    #: Raw parameters of the rows taken by ``scan_run``, row after row (``nparams`` each),
    #: decoded when the rows go to the engine.
    raw: list[bytes | None] = field(default_factory=list)
    #: The first Bind's parameter format codes (None: no fast path), its bytes up to the
    #: parameter count, parameter count and result format codes: the shape ``scan_run`` takes.
    formats: tuple[int, ...] | None = None
    bind_head: bytes = b""
    nparams: int = 0
    result_formats: tuple[int, ...] = ()
    last_described: bool = False
    #: Rows handed to the engine so far, raw rows decoded so far, parts started, the part in flight.
    executed: int = 0
    raw_used: int = 0
    chunks: int = 0
    inflight: asyncio.Future[int] | None = None


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
