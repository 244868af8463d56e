"""The statement nodes of YDB's asynchronous replication and its secrets (``changefeed.sql.ast``
re-exports them with the others): ``CREATE``/``ALTER``/``DROP ASYNC REPLICATION``, ``CREATE``/``DROP
SECRET``."""

from __future__ import annotations

from dataclasses import dataclass, field

from changefeed.sql.ast_expressions import Option, Pos, QName


@dataclass(frozen=True, slots=True)
class ReplicationItem:
    """``<remote_path> AS <local_path>`` of ``CREATE ASYNC REPLICATION``."""

    source: QName
    target: QName


@dataclass(frozen=True, slots=True)
class CreateAsyncReplication:
    """YDB ``CREATE ASYNC REPLICATION name FOR src AS dst [, ...] WITH (option = value, ...)``."""

    name: QName
    items: tuple[ReplicationItem, ...]
    options: tuple[Option, ...]
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class AlterAsyncReplication:
    """YDB ``ALTER ASYNC REPLICATION name SET (option = value, ...)``."""

    name: QName
    options: tuple[Option, ...]
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropAsyncReplication:
    """YDB ``DROP ASYNC REPLICATION name [CASCADE]``."""

    name: QName
    cascade: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class CreateSecret:
    """YDB ``CREATE [OR REPLACE] SECRET [IF NOT EXISTS] name WITH (value = '..')``."""

    name: QName
    options: tuple[Option, ...]
    or_replace: bool = False
    if_not_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True, slots=True)
class DropSecret:
    """YDB ``DROP SECRET [IF EXISTS] name``."""

    name: QName
    if_exists: bool = False
    pos: Pos = field(default=Pos(), compare=False)
