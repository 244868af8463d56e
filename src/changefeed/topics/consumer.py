"""The Python consumer of the embedded topics, with Kafka-like positioning.

* no group, no ``from_beginning``: start at the end (only records appended from now on);
* ``from_beginning``: start at each partition's earliest available offset;
* a group: start at the group's committed offset, or as above where the group has none.

When retention deleted records the consumer was about to read, it continues at the earliest
available offset: the "offset skip" the YDB spec warns about.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from types import TracebackType

from changefeed.exceptions import TopicError
from changefeed.topics.store import Record, TopicStore

__all__ = ["Consumer"]

_MIN_SLEEP = 0.02
_MAX_SLEEP = 0.25


class Consumer:
    def __init__(
        self,
        db_dir: str | os.PathLike[str] | TopicStore,
        topic: str,
        *,
        group: str | None = None,
        partitions: list[int] | None = None,
        from_beginning: bool = False,
    ) -> None:
        self.store = db_dir if isinstance(db_dir, TopicStore) else TopicStore(db_dir)
        self.topic = topic
        self.group = group
        if group is not None and (not isinstance(group, str) or not group):
            raise TopicError(f"invalid consumer group {group!r}: must be a non-empty string")
        info = self.store.topic(topic)
        if partitions is None:
            self.partitions = list(range(info.partitions))
        else:
            for p in partitions:
                if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < info.partitions:
                    raise TopicError(
                        f"partition {p} out of range for topic {topic!r} (partitions 0..{info.partitions - 1})"
                    )
            self.partitions = sorted(set(partitions))
        ends = self.store.offsets(topic)
        committed = self.store.committed_offsets(group, topic) if group is not None else {}
        #: partition -> next offset this consumer reads
        self.positions: dict[int, int] = {}
        for p in self.partitions:
            earliest, nxt = ends[p]
            if p in committed:
                self.positions[p] = committed[p]
            else:
                self.positions[p] = earliest if from_beginning else nxt
        self._rr = 0
        self._closed = threading.Event()

    # -- reading -----------------------------------------------------------------------------

    def _poll_once(self, max_records: int) -> list[Record]:
        out: list[Record] = []
        n = len(self.partitions)
        if n == 0 or max_records <= 0:
            return out
        # Round-robin over partitions, starting one further each call, so none starves.
        order = [self.partitions[(self._rr + i) % n] for i in range(n)]
        self._rr = (self._rr + 1) % n
        share = max(1, max_records // n)
        for i, p in enumerate(order):
            left = max_records - len(out)
            if left <= 0:
                break
            want = left if i == n - 1 else min(left, share)
            recs = self.store.read(self.topic, p, self.positions[p], want)
            if recs:
                self.positions[p] = recs[-1].offset + 1
                out.extend(recs)
        if len(out) < max_records:
            # Partitions may have had more than their share: top up in the same order.
            for p in order:
                left = max_records - len(out)
                if left <= 0:
                    break
                recs = self.store.read(self.topic, p, self.positions[p], left)
                if recs:
                    self.positions[p] = recs[-1].offset + 1
                    out.extend(recs)
        return out

    def poll(self, max_records: int = 1000, timeout: float = 0.0) -> list[Record]:
        """Up to ``max_records`` records across the assigned partitions, each partition's in
        offset order. Waits up to ``timeout`` seconds for new data when there is none."""
        if self._closed.is_set():
            raise TopicError("consumer is closed")
        return self._poll(max_records, timeout)

    def _poll(self, max_records: int, timeout: float) -> list[Record]:
        deadline = time.monotonic() + max(0.0, timeout)
        sleep = _MIN_SLEEP
        while True:
            recs = self._poll_once(max_records)
            if recs:
                return recs
            left = deadline - time.monotonic()
            if left <= 0 or self._closed.is_set():
                return []
            self._closed.wait(min(sleep, left))
            sleep = min(sleep * 2, _MAX_SLEEP)

    def caught_up(self, end_offsets: dict[int, tuple[int, int]] | None = None) -> bool:
        """True when every assigned partition's position is at (or past) its next offset."""
        ends = self.store.offsets(self.topic) if end_offsets is None else end_offsets
        return all(self.positions[p] >= ends[p][1] for p in self.partitions)

    def commit(self) -> None:
        """Commit the group's offsets: for each partition the offset after what poll returned."""
        if self.group is None:
            raise TopicError("commit needs a consumer group")
        self.store.commit_offsets(self.group, self.topic, dict(self.positions))

    def seek(self, partition: int, offset: int) -> None:
        if partition not in self.positions:
            raise TopicError(f"partition {partition} is not assigned to this consumer")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise TopicError(f"offset must be a non-negative integer, got {offset!r}")
        self.positions[partition] = offset

    def __iter__(self) -> Iterator[Record]:
        """Follow mode: yields records as they arrive until :meth:`close`."""
        while not self._closed.is_set():
            yield from self._poll(1000, 1.0)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._closed.set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
