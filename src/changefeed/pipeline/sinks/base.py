"""The sink writer seam: what every sink writer offers (see the package docstring)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs


#: CockroachDB's mark of an error the job retries without giving up (``MarkRetryableError``):
#: a sink that cannot reach its endpoint raises a SinkError whose text starts with it.
RETRYABLE = "retryable changefeed error: "


class SinkWriter(ABC):
    driver_only: bool = False

    def begin_batch(self, writer: str, batch_id: int) -> None:  # noqa: B027 - optional hook
        """A micro-batch of ``writer`` starts: every append and resolved message until
        :meth:`commit_batch` belongs to it (a transactional sink writes them atomically)."""

    def commit_batch(self, writer: str, batch_id: int) -> None:  # noqa: B027 - optional hook
        """The micro-batch is complete: a transactional sink commits it. The job's progress is
        recorded only after this returns."""

    @abstractmethod
    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None: ...

    @abstractmethod
    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None: ...
