"""The sink writer seam: what every sink writer offers (see the package docstring)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs


class SinkWriter(ABC):
    driver_only: bool = False

    @abstractmethod
    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None: ...

    @abstractmethod
    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None: ...
