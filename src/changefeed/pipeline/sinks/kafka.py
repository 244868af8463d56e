"""CockroachDB's Kafka sink: a librdkafka producer (confluent-kafka) per sink and process.

``append`` produces one topic partition's records of a micro-batch (from the Spark executor that
holds them, inside ``mapInArrow``), then flushes and waits for every delivery report: it returns
only once the brokers acknowledged every message, and raises :class:`SinkError` otherwise, so the
micro-batch fails before its checkpoint is written and is replayed.

* Partitioning is CockroachDB's (sarama's hash partitioner): FNV-1a 32-bit of the key bytes,
  ``int32(hash) % partitions``, negated when negative, over the partition count the topic's
  metadata reports. A key's records come from one pipeline partition in commit order and go to
  one Kafka partition in that order.
* Resolved messages (no key) go to every partition of the feed's topic, after all the data of
  the batch was acknowledged.
* A topic missing on the cluster is created with the admin API (CreateTopics, the brokers'
  default partition count and replication factor), as the brokers' auto-creation would; an
  existing topic is used as it is.
* The producer is idempotent (``enable.idempotence``, acks=all) unless ``RequiredAcks`` asks for
  ONE or NONE: its own retries never duplicate or reorder. A micro-batch replayed after a crash
  is produced again by a new producer, so delivery is at least once (like CockroachDB's).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from changefeed.exceptions import SinkError
from changefeed.feeds.kafka_config import METADATA_TIMEOUT_S, KafkaConfig
from changefeed.pipeline.sinks.base import SinkWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
#: Re-read a topic's partition count at most this often (CockroachDB refreshes once a minute).
METADATA_REFRESH_S = 60.0

#: librdkafka's own log lines (connection failures...) go through logging, not raw to stderr.
log = logging.getLogger(__name__)

_PRODUCERS: dict[KafkaConfig, Any] = {}
_PARTITIONS: dict[tuple[KafkaConfig, str], tuple[int, float]] = {}
_LOCK = threading.Lock()


def fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def partition_for(key: bytes, partitions: int) -> int:
    """sarama's hash partitioner: ``int32(fnv1a(key)) % n``, negated when negative."""
    h = fnv32a(key)
    if h >= 1 << 31:
        h -= 1 << 32
    p = abs(h) % partitions  # Go's % truncates toward zero; -(h % n) == abs(h) % n for h < 0
    return p


def _short(err: Any) -> str:
    text = err.str() if hasattr(err, "str") else str(err)
    return str(text).strip()


def producer_for(cfg: KafkaConfig) -> Any:
    """One producer per sink configuration and process (Spark reuses its Python workers)."""
    from confluent_kafka import Producer

    with _LOCK:
        p = _PRODUCERS.get(cfg)
        if p is None:
            p = Producer({**cfg.librdkafka(), "logger": log})
            _PRODUCERS[cfg] = p
        return p


def _drop_producer(cfg: KafkaConfig) -> None:
    with _LOCK:
        p = _PRODUCERS.pop(cfg, None)
    if p is not None:
        try:
            p.purge()
            p.flush(0)
        except Exception:  # a broken producer is replaced anyway
            pass


def topic_partitions(cfg: KafkaConfig, topic: str, *, refresh: bool = False) -> int:
    """The topic's partition count from the cluster's metadata; creates the topic if missing."""
    now = time.monotonic()
    with _LOCK:
        got = _PARTITIONS.get((cfg, topic))
    if got is not None and not refresh and now - got[1] < METADATA_REFRESH_S:
        return got[0]
    from confluent_kafka import KafkaError, KafkaException

    producer = producer_for(cfg)
    deadline = now + METADATA_TIMEOUT_S
    created = False
    while True:
        try:
            meta = producer.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
        except KafkaException as exc:
            _drop_producer(cfg)
            raise SinkError(
                f"kafka sink: connecting to kafka: {cfg.brokers}: {_short(exc.args[0])}"
            ) from None
        info = meta.topics.get(topic)
        err = None if info is None else info.error
        if info is not None and err is None and info.partitions:
            n = len(info.partitions)
            with _LOCK:
                _PARTITIONS[(cfg, topic)] = (n, time.monotonic())
            return n
        missing = info is None or (err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
        if missing and not created:
            create_topic(cfg, topic)
            created = True
        elif time.monotonic() >= deadline:
            raise SinkError(
                f"kafka sink {cfg.brokers}: topic {topic}: "
                + (_short(err) if err is not None else "no partitions in the cluster's metadata")
            )
        else:
            time.sleep(0.1)


def create_topic(cfg: KafkaConfig, topic: str) -> None:
    """CreateTopics with the brokers' default partitions and replication (TOPIC_ALREADY_EXISTS is fine)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    conf: dict[str, Any] = {**cfg.admin(), "logger": log}
    admin = AdminClient(conf)
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=-1, replication_factor=-1)], request_timeout=METADATA_TIMEOUT_S
    )
    try:
        futures[topic].result(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise SinkError(
                f"kafka sink {cfg.brokers}: could not create topic {topic}: {_short(err)}"
            ) from None


class KafkaWriter(SinkWriter):
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config

    # ------------------------------------------------------------------ SinkWriter
    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None:
        n = topic_partitions(self.config, topic)
        keys = records.column("key").to_pylist()
        values = records.column("value").to_pylist()
        stamps = records.column("ts").to_pylist()
        msgs = [
            (k, v, partition_for(k, n), ts // 1_000_000)
            for k, v, ts in zip(keys, values, stamps, strict=True)
            if k is not None
        ]
        self.produce(topic, msgs)

    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None:
        n = topic_partitions(self.config, topic)
        self.produce(topic, [(None, payload, p, ts.wall // 1_000_000) for p in range(n)])

    # ------------------------------------------------------------------ producing
    def produce(self, topic: str, msgs: list[tuple[bytes | None, bytes, int, int]]) -> None:
        """Produce ``(key, value, partition, timestamp ms)`` messages; return once every one was
        acknowledged (raise SinkError on the first failure or on the delivery time-out)."""
        if not msgs:
            return
        from confluent_kafka import KafkaException

        cfg = self.config
        producer = producer_for(cfg)
        errors: list[str] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None and len(errors) < 5:
                key = msg.key()
                errors.append(
                    f"{_short(err)} while sending message with key={key.decode(errors='replace') if key else ''}, "
                    f"size={len(key or b'') + len(msg.value() or b'')}"
                )

        try:
            for key, value, p, ts in msgs:
                while True:
                    try:
                        producer.produce(topic, value, key, partition=p, timestamp=ts, on_delivery=report)
                        break
                    except BufferError:  # the local queue is full: serve delivery reports first
                        producer.poll(0.05)
                if errors:
                    break
            left = producer.flush(cfg.delivery_timeout_ms / 1000 + 5)
        except KafkaException as exc:
            _drop_producer(cfg)
            raise SinkError(f"kafka sink {cfg.brokers}: topic {topic}: {_short(exc.args[0])}") from None
        if errors or left:
            _drop_producer(cfg)  # an idempotent producer may be fenced after a failure: start afresh
            with _LOCK:
                _PARTITIONS.pop((cfg, topic), None)  # the partitions may have changed
            what = errors[0] if errors else f"{left} messages not acknowledged"
            raise SinkError(f"kafka sink {cfg.brokers}: topic {topic}: {what}")

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
