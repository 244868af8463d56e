"""The statement state of one connection: prepared statements, portals, the running query, and
the batch of pipelined Executes waiting to run together (see ``batch.py``)."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from changefeed.connection import Result
from changefeed.server.pg.commands import Command
from changefeed.sql import ast


@dataclass
class Prepared:
    sql: str
    kind: str  # empty | command | catalog | engine | stream
    stmts: list[ast.Statement] = field(default_factory=list)
    command: Command | None = None
    param_oids: list[int] = field(default_factory=list)
    inline: bool = False  # short: run on the event loop (see inline.py)


@dataclass
class Batch:
    """Executes of one statement waiting to run together (``PgSession.flush_batch``), with the
    replies due before each one's CommandComplete (BindComplete, NoData), held back so that the
    replies go out in the order of the messages."""

    prepared: Prepared
    rows: list[list[Any]] = field(default_factory=list)
    replies: list[bytes] = field(default_factory=list)
    pending: list[bytes] = field(default_factory=list)


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]
    result: Result | None = None
    pos: int = 0
    described: bool = False


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
