"""Topic retention applied by the Kafka endpoint itself, as a Kafka broker's log manager does.

A Kafka broker deletes expired log segments on its own, every ``log.retention.check.interval.ms``
(5 minutes by default), the first time ``log.initial.task.delay.ms`` (30 s) after it starts. The
endpoint does the same with the topic log's own retention pass,
:meth:`changefeed.topics.TopicStore.apply_retention`, the one the node's pipeline runs: each
partition's stored batches whose write time is older than the topic's ``retention.ms`` are deleted
whole, offsets are never renumbered, and the partition's log start (ListOffsets earliest) moves
to its first remaining offset, so a Fetch below it gets ``OFFSET_OUT_OF_RANGE``. It protects
exactly what the node's pass protects: as in Kafka and in YDB topics, expired records go whether
a consumer read them or not; what changefeeds still need is protected on the journal (protected
timestamps, ``changefeed.engine.gc``), which this pass does not touch. Running beside a node's
own pass is harmless: each partition's delete is one write transaction.

The interval comes from :data:`CHECK_INTERVAL_ENV` (milliseconds, at least 1, default
:data:`DEFAULT_CHECK_INTERVAL_MS`, Kafka's), or from the endpoint's ``retention_check_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from changefeed.exceptions import InvalidOption
from changefeed.topics.store import TopicStore

__all__ = [
    "CHECK_INTERVAL_ENV",
    "DEFAULT_CHECK_INTERVAL_MS",
    "INITIAL_DELAY_MS",
    "RetentionTask",
    "check_interval_ms",
]

log = logging.getLogger("changefeed.server.kafka")

#: Environment variable: how often the endpoint applies topic retention, in ms (Kafka's
#: ``log.retention.check.interval.ms``).
CHECK_INTERVAL_ENV = "CHANGEFEED_KAFKA_RETENTION_CHECK_INTERVAL_MS"
#: Kafka's default ``log.retention.check.interval.ms``: 5 minutes.
DEFAULT_CHECK_INTERVAL_MS = 300_000
#: Kafka's ``log.initial.task.delay.ms``: the first pass comes this long after the start, or after
#: one interval when that is shorter.
INITIAL_DELAY_MS = 30_000
#: The longest interval taken (Kafka's is a LONG; past this asyncio's timers overflow).
_MAX_INTERVAL_MS = 1 << 40


def check_interval_ms(value: int | str | None = None) -> int:
    """The retention check interval, in ms: ``value``, else :data:`CHECK_INTERVAL_ENV`, else
    :data:`DEFAULT_CHECK_INTERVAL_MS`; InvalidOption unless it is a whole number from 1 on (as
    Kafka's ``atLeast(1)``)."""
    source = f"retention check interval {value!r}"
    if value is None:
        raw = os.environ.get(CHECK_INTERVAL_ENV, "").strip()
        if not raw:
            return DEFAULT_CHECK_INTERVAL_MS
        value, source = raw, f"{CHECK_INTERVAL_ENV}={raw!r}"
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isdigit() else -1
    if isinstance(value, bool) or not 1 <= value <= _MAX_INTERVAL_MS:
        raise InvalidOption(
            f"{source}: expected a number of milliseconds from 1 to {_MAX_INTERVAL_MS} "
            f"(default {DEFAULT_CHECK_INTERVAL_MS}, Kafka's log.retention.check.interval.ms)"
        )
    return value


class RetentionTask:
    """Applies ``store``'s retention every ``interval_ms`` on the running event loop, the work
    itself in the loop's thread pool (one pass at a time; a failed pass is logged and the next
    one runs on time)."""

    def __init__(self, store: TopicStore, interval_ms: int) -> None:
        self.store = store
        self.interval_ms = interval_ms
        self.passes = 0  #: passes completed (tests wait on it)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kafka-retention")

    async def stop(self) -> None:
        """Stop, after the pass under way (if any) has finished: the store stays usable till then."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        delay_ms: float = min(INITIAL_DELAY_MS, self.interval_ms)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay_ms / 1000)
            if self._stop.is_set():
                return
            started = loop.time()
            try:
                deleted = await loop.run_in_executor(None, self.store.apply_retention)
            except Exception as exc:  # best effort, as the node's pipeline's pass
                log.warning("kafka: applying topic retention failed: %s", exc)
            else:
                if deleted:
                    log.info("kafka: retention deleted %d records", deleted)
            self.passes += 1
            delay_ms = max(0.0, self.interval_ms - (loop.time() - started) * 1000)
