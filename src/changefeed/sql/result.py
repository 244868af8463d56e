"""What a statement returns to the client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from changefeed.engine.types import SqlType


@dataclass
class Result:
    """What a statement returns: column names, rows of Python values, and a status tag."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    types: list[SqlType | None] = field(default_factory=list)
    status: str = ""
    rowcount: int = 0

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)
