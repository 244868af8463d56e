"""Exactly-once into Kafka (the ``exactly_once`` job option; CockroachDB has none: its sink is
at least once).

Each micro-batch of a job's writer is one Kafka transaction, and the job advances only after
it committed:

* **One transactional producer per job and writer**, ``transactional.id =
  changefeed-<job id>-<writer>`` (the writer is the feed's streaming query, its initial scan, or
  the job's resolved emitter). The id is stable across restarts, so ``init_transactions`` of a
  restarted pipeline fences the producer of the killed one (its epoch is bumped: a zombie can
  no longer write) and aborts the transaction it left open.
* **A commit marker in the same transaction.** With the batch's records the transaction commits,
  through ``send_offsets_to_transaction``, the offset ``batch id + 1`` of partition 0 of every
  topic the batch wrote, for the consumer group named like the transactional id. Records and
  marker commit atomically, or neither does.
* **A replayed batch is skipped when its marker is there.** Spark replays the last batch id
  after a crash; the first produce of a batch reads the marker (``read_committed``, after
  ``init_transactions`` settled any transaction in doubt): a marker at or past the batch means
  the batch committed before the crash, and its records are not produced again.

A ``read_committed`` consumer of the topics then sees each change once; ``read_uncommitted``
consumers may also see records of aborted transactions, as with any transactional producer.

Calls without :meth:`Transactions.begin` (a job's resolved messages, emitted per topic) are a
transaction each, with the same marker and skip rule.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from changefeed.exceptions import SinkError
from changefeed.feeds.kafka_config import METADATA_TIMEOUT_S, KafkaConfig
from changefeed.pipeline.sinks.kafka_client import error_text, librdkafka_log, sink_error

__all__ = ["Transactions", "transactional_id"]

log = logging.getLogger(__name__)

#: librdkafka's transaction.timeout.ms: a transaction left open longer is aborted by the broker.
TRANSACTION_TIMEOUT_MS = 60_000


def transactional_id(job_id: int, writer: str) -> str:
    return f"changefeed-{job_id}-{writer}"


@dataclass
class _Writer:
    """One writer's transactional producer, its marker reader, and the batch in progress."""

    tid: str
    producer: Any
    markers: Any  # a Consumer of group ``tid`` (never subscribes): reads markers, gives group metadata
    batch_id: int | None = None
    state: str = "idle"  # idle | open (a transaction under way) | skip (the batch was delivered)
    explicit: bool = False  # begin() was called: commit() ends the batch
    topics: set[str] = field(default_factory=set)
    errors: list[tuple[str, bool]] = field(default_factory=list)


class Transactions:
    """The transactional producers of one sink configuration and job, in this process."""

    _registry: ClassVar[dict[tuple[KafkaConfig, str], _Writer]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, config: KafkaConfig, job_id: int) -> None:
        self.config = config
        self.job_id = job_id

    # ------------------------------------------------------------------ producers
    def _writer(self, writer: str) -> _Writer:
        tid = transactional_id(self.job_id, writer)
        key = (self.config, tid)
        with self._lock:
            w = self._registry.get(key)
        if w is not None:
            return w
        from confluent_kafka import Consumer, KafkaException, Producer

        conf = {
            **self.config.librdkafka(),
            "enable.idempotence": True,
            "acks": -1,
            "transactional.id": tid,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "logger": librdkafka_log,
        }
        producer = Producer(conf)
        try:
            # Fences the producer of a killed pipeline and settles its open transaction.
            producer.init_transactions(METADATA_TIMEOUT_S * 3)
        except KafkaException as exc:
            text, retryable = error_text(exc.args[0])
            raise sink_error(self.config, f"initializing transactions ({tid}): {text}", retryable) from None
        markers = Consumer(
            {
                **self.config.admin(),
                "group.id": tid,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "logger": librdkafka_log,
            }
        )
        w = _Writer(tid, producer, markers)
        with self._lock:
            self._registry[key] = w
        return w

    def _drop(self, w: _Writer) -> None:
        with self._lock:
            self._registry.pop((self.config, w.tid), None)
        with contextlib.suppress(Exception):  # replaced anyway
            w.markers.close()

    def _abort(self, w: _Writer) -> None:
        from confluent_kafka import KafkaException

        if w.state == "open":
            try:
                w.producer.abort_transaction(METADATA_TIMEOUT_S * 3)
            except KafkaException:
                self._drop(w)  # a fenced or broken producer: a new one settles the transaction
        w.state, w.batch_id, w.explicit = "idle", None, False
        w.topics.clear()
        w.errors.clear()

    def delivered(self, w: _Writer, topic: str, batch_id: int) -> bool:
        """Did batch ``batch_id`` of this writer commit (its marker on ``topic``)?"""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            got = w.markers.committed([TopicPartition(topic, 0)], timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            text, retryable = error_text(exc.args[0])
            raise sink_error(
                self.config, f"reading the commit marker of {w.tid}: {text}", retryable
            ) from None
        offset = got[0].offset if got else -1001
        return offset >= batch_id + 1

    # ------------------------------------------------------------------ batches
    def begin(self, writer: str, batch_id: int) -> None:
        w = self._writer(writer)
        self._abort(w)  # a batch that failed half-way (its transaction was left open)
        w.batch_id, w.explicit = batch_id, True

    def produce(
        self,
        writer: str,
        batch_id: int,
        topic: str,
        msgs: Sequence[tuple[bytes | None, bytes, int, int]],
        *,
        whole: bool = False,
    ) -> None:
        """Produce into the writer's transaction of ``batch_id``. Without :meth:`begin`, only a
        ``whole`` batch (one call: a job's resolved message to every partition of a topic) may
        come as its own transaction: the marker covers the batch, so a second call of the same
        batch would be taken for a replay."""
        w = self._writer(writer)
        if not whole and not (w.explicit and w.batch_id == batch_id):
            raise SinkError(
                f"{w.tid}: exactly_once: batch {batch_id} appended outside begin_batch/commit_batch"
            )
        if w.batch_id != batch_id or (w.state == "idle" and not w.explicit):
            self._abort(w)
            w.batch_id = batch_id
        if w.state == "skip":
            return
        if w.state == "idle":
            if self.delivered(w, topic, batch_id):
                log.info("%s: batch %d was committed before a restart; not produced again", w.tid, batch_id)
                w.state = "skip"
                if not w.explicit:
                    self._abort(w)
                return
            w.producer.begin_transaction()
            w.state = "open"
        w.topics.add(topic)
        self._send(w, topic, msgs)
        if not w.explicit:
            self.commit(writer, batch_id)

    def _send(self, w: _Writer, topic: str, msgs: Sequence[tuple[bytes | None, bytes, int, int]]) -> None:
        from confluent_kafka import KafkaException

        def report(err: Any, msg: Any) -> None:
            if err is not None and len(w.errors) < 5:
                text, retryable = error_text(err)
                w.errors.append(
                    (f"kafka: Failed to produce message to topic {msg.topic()}: {text}", retryable)
                )

        producer = w.producer
        try:
            for key, value, p, ts in msgs:
                while True:
                    try:
                        producer.produce(topic, value, key, partition=p, timestamp=ts, on_delivery=report)
                        break
                    except BufferError:
                        producer.poll(0.05)
                if w.errors:
                    break
            producer.poll(0)
        except KafkaException as exc:
            text, retryable = error_text(exc.args[0])
            self._abort(w)
            raise sink_error(self.config, f"topic {topic}: {text}", retryable) from None
        if w.errors:
            what, retryable = w.errors[0]
            self._abort(w)
            raise sink_error(self.config, what, retryable)

    def commit(self, writer: str, batch_id: int) -> None:
        """Commit the batch's transaction with its marker; the job may advance after this."""
        from confluent_kafka import KafkaException, TopicPartition

        w = self._writer(writer)
        if w.batch_id != batch_id or w.state != "open":
            w.state, w.explicit = "idle", False  # nothing produced, or a delivered batch skipped
            return
        try:
            marks = [TopicPartition(t, 0, batch_id + 1) for t in sorted(w.topics)]
            w.producer.send_offsets_to_transaction(
                marks, w.markers.consumer_group_metadata(), METADATA_TIMEOUT_S * 3
            )
            w.producer.commit_transaction(self.config.delivery_timeout_ms / 1000 + 5)
        except KafkaException as exc:
            err = exc.args[0]
            text, retryable = error_text(err)
            if w.errors:
                text, retryable = w.errors[0]
            fatal = bool(getattr(err, "fatal", lambda: False)())
            if fatal:
                self._drop(w)
            else:
                self._abort(w)
            raise sink_error(
                self.config, f"committing the transaction of {w.tid}: {text}", retryable
            ) from None
        w.state, w.batch_id, w.explicit = "idle", None, False
        w.topics.clear()


def check_no_open_transactions() -> None:
    """For tests: every writer's transaction is settled."""
    for w in Transactions._registry.values():
        if w.state == "open":
            raise SinkError(f"{w.tid}: a transaction is still open")
