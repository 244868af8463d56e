"""The CQL endpoint's results: a Rows RESULT's body (metadata, count, cells), a kept result's
rows that are encoded a page at a time, and a SCHEMA_CHANGE's body."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from changefeed.server.cql import wire as w
from changefeed.server.cql.columnar import EncodedRows
from changefeed.server.cql.statements import SchemaChange
from changefeed.server.cql.types import CqlType, rows_encoder

__all__ = [
    "ColumnarRows",
    "PageRows",
    "Paged",
    "TupleRows",
    "page_body",
    "rows_body",
    "rows_head",
    "schema_change_body",
]


class PageRows(Protocol):
    """A kept result's rows, encoded a page at a time."""

    #: Whether encoding a page costs little enough to do on the event loop.
    cheap: bool

    def __len__(self) -> int: ...

    def cells(self, lo: int, hi: int) -> bytes:
        """The cells of rows ``lo`` to ``hi`` (exclusive), end to end."""
        ...


class TupleRows:
    """Rows of Python values (a statement's :class:`Result`), encoded page by page."""

    cheap = False

    def __init__(self, rows: list[tuple[Any, ...]], types: list[CqlType]) -> None:
        self.rows = rows
        self.encode = rows_encoder(types)

    def __len__(self) -> int:
        return len(self.rows)

    def cells(self, lo: int, hi: int) -> bytes:
        return self.encode(self.rows[lo:hi])


class ColumnarRows:
    """Rows encoded column-wise at once (a CDC log window): a page is a slice of their bytes."""

    cheap = True

    def __init__(self, rows: EncodedRows) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def cells(self, lo: int, hi: int) -> bytes:
        return self.rows.cells(lo, hi)


@dataclass
class Paged:
    key: bytes
    columns: list[str]
    types: list[CqlType]
    table: tuple[str, str]
    rows: PageRows
    at: float
    #: Pages encoded ahead, by (offset, page size, metadata skipped): while the client decodes a
    #: page, the pool encodes the next one, so paging uses both cores.
    ahead: dict[tuple[int, int, bool], asyncio.Future[bytes]] = field(default_factory=dict)


def schema_change_body(change: SchemaChange) -> bytes:
    body = w.Writer().string(change.change).string(change.target).string(change.keyspace)
    if change.target != "KEYSPACE":
        body.string(change.name)
    return body.getvalue()


def page_body(paged: Paged, lo: int, hi: int, paging_state: bytes | None, skip_metadata: bool) -> bytes:
    """The Rows RESULT of rows ``lo`` to ``hi`` of a kept result."""
    return rows_head(paged.columns, paged.types, paged.table, hi - lo, paging_state, skip_metadata) + (
        paged.rows.cells(lo, hi)
    )


def rows_body(
    columns: list[str],
    types: list[CqlType],
    table: tuple[str, str],
    rows: Sequence[Sequence[Any]],
    paging_state: bytes | None,
    skip_metadata: bool = False,
) -> bytes:
    """A Rows RESULT: metadata (unless skipped), the row count, the cells."""
    head = rows_head(columns, types, table, len(rows), paging_state, skip_metadata)
    return head + rows_encoder(types)(rows)


def rows_head(
    columns: list[str],
    types: list[CqlType],
    table: tuple[str, str],
    count: int,
    paging_state: bytes | None,
    skip_metadata: bool,
) -> bytes:
    """A Rows RESULT up to its cells: metadata (unless skipped) and the row count."""
    head = w.Writer().int(w.ROWS)
    flags = 0 if skip_metadata else w.M_GLOBAL_TABLES_SPEC
    if paging_state is not None:
        flags |= w.M_HAS_MORE_PAGES
    if skip_metadata:
        flags |= w.M_NO_METADATA
    head.int(flags).int(len(columns))
    if paging_state is not None:
        head.bytes_(paging_state)
    if not skip_metadata:
        head.string(table[0]).string(table[1])
        for name, t in zip(columns, types, strict=True):
            head.string(name).raw(t.option())
    head.int(count)
    return head.getvalue()
