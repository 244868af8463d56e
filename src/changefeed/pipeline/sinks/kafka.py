"""CockroachDB's Kafka sink: a librdkafka producer (confluent-kafka) per sink and process.

``append`` produces one topic partition's records of a micro-batch, then flushes and waits for
every delivery report: it returns only once the brokers acknowledged every message, and raises
:class:`SinkError` otherwise, so the micro-batch fails before its checkpoint is written and is
replayed.

* Partitioning is CockroachDB's: by default sarama's hash partitioner (FNV-1a 32-bit of the key
  bytes, ``int32(hash) % partitions``, negated when negative); with ``partition_alg='murmur2'``
  Kafka's Java client's (murmur2, ``(hash & 0x7fffffff) % partitions``). The partition count
  is the topic's, from the cluster's metadata. A key's records come from one pipeline partition
  in commit order and go to one Kafka partition in that order.
* Resolved messages (no key) go to every partition of the feed's topic, after all the data of
  the batch was acknowledged.
* A missing topic is created by the brokers' auto-creation, as CockroachDB relies on (the
  producer's metadata request asks for it); a cluster with ``auto.create.topics.enable=false``
  answers ``UNKNOWN_TOPIC_OR_PARTITION``, which fails the job as CockroachDB words it.
* The producer is idempotent (``enable.idempotence``, acks=all) unless ``RequiredAcks`` asks for
  ONE or NONE: its own retries never duplicate or reorder. A micro-batch replayed after a crash
  is produced again by a new producer, so delivery is at least once (like CockroachDB's).
* ``exactly_once`` (ours; :mod:`changefeed.pipeline.sinks.kafka_txn`): each micro-batch is one
  Kafka transaction, committed with a marker that tells a replayed batch it was delivered.

Errors: connection failures and time-outs are retryable (``retryable changefeed error: ...``,
CockroachDB's prefix): the runner retries the job with backoff, without giving up. The brokers'
refusals (topic authorization, message too large, unknown topic, authentication) are not: the
job fails, or pauses with ``on_error='pause'``. librdkafka's own log lines go through
:mod:`logging`, rate-limited (:class:`RateLimitedLog`).
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from changefeed.exceptions import SinkError
from changefeed.feeds.kafka_config import METADATA_TIMEOUT_S, KafkaConfig
from changefeed.pipeline.sinks.base import RETRYABLE, SinkWriter
from changefeed.pipeline.sinks.kafka_client import (
    RateLimitedLog,
    error_text,
    librdkafka_limit,
    librdkafka_log,
    short,
    sink_error,
)
from changefeed.pipeline.sinks.kafka_txn import Transactions

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs

__all__ = [
    "RETRYABLE",
    "KafkaWriter",
    "RateLimitedLog",
    "dial",
    "error_text",
    "fnv32a",
    "librdkafka_limit",
    "librdkafka_log",
    "murmur2",
    "partition_for",
    "partitions_for",
    "short",
    "sink_error",
]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
#: Re-read a topic's partition count at most this often (CockroachDB refreshes once a minute).
METADATA_REFRESH_S = 60.0
#: How long a topic missing from the cluster's metadata is waited for before it counts as refused:
#: the brokers' auto-creation, or a broker that has just started and is still loading its
#: metadata, answer UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE for a while (librdkafka
#: waits ``topic.metadata.propagation.max.ms``, 30 s). Each metadata request has
#: ``METADATA_TIMEOUT_S``.
TOPIC_PROPAGATION_S = 10.0
#: How long a TCP connection to a broker may take when CREATE CHANGEFEED dials the sink.
DIAL_TIMEOUT_S = 5.0


_PRODUCERS: dict[KafkaConfig, Any] = {}
_PARTITIONS: dict[tuple[KafkaConfig, str], tuple[int, float]] = {}
_LOCK = threading.Lock()


# ---------------------------------------------------------------------------------- partitioning
def fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) as an unsigned 32-bit value."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for(key: bytes, partitions: int, alg: str = "fnv-1a") -> int:
    """The partition of ``key``: sarama's hash partitioner (``int32(fnv1a(key)) % n``, negated
    when negative) or, for ``murmur2``, Kafka's (``toPositive(murmur2(key)) % n``)."""
    if alg == "murmur2":
        return (murmur2(key) & 0x7FFFFFFF) % partitions
    h = fnv32a(key)
    if h >= 1 << 31:
        h -= 1 << 32
    return abs(h) % partitions  # Go's % truncates toward zero; -(h % n) == abs(h) % n for h < 0


def partitions_for(keys: Sequence[bytes], partitions: int, alg: str = "fnv-1a") -> list[int]:
    """:func:`partition_for` of many keys; FNV-1a runs column-wise (numpy) over the keys' bytes."""
    if partitions == 1:
        return [0] * len(keys)
    if alg != "fnv-1a" or not keys:
        return [partition_for(k, partitions, alg) for k in keys]
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    width = int(lengths.max())
    buf = np.frombuffer(b"".join(k.ljust(width, b"\0") for k in keys), np.uint8).reshape(len(keys), width)
    h = np.full(len(keys), _FNV_OFFSET, np.uint64)
    for col in range(width):
        live = lengths > col
        step = ((h ^ buf[:, col]) * np.uint64(_FNV_PRIME)) & np.uint64(0xFFFFFFFF)
        h = np.where(live, step, h)
    signed = h.astype(np.int64)
    signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)
    return [int(x) for x in np.abs(signed) % partitions]


# ---------------------------------------------------------------------------------- dialing
def _go_dial_error(host: str, port: int, exc: OSError) -> str:
    """An OS connect error as Go's net package words it (``dial tcp H:P: connect: ...``)."""
    if isinstance(exc, socket.gaierror):
        return f"dial tcp: lookup {host}: no such host"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"dial tcp {host}:{port}: i/o timeout"
    reason = {
        errno.ECONNREFUSED: "connection refused",
        errno.EHOSTUNREACH: "no route to host",
        errno.ENETUNREACH: "network is unreachable",
    }.get(exc.errno or 0, (exc.strerror or str(exc)).lower())
    return f"dial tcp {host}:{port}: connect: {reason}"


def dial(cfg: KafkaConfig) -> None:
    """What CockroachDB does at CREATE CHANGEFEED: dial the sink. Every broker of the URI is
    tried; none reachable is ``unable to dial: ...``; a reachable cluster must then answer a
    metadata request (TLS and SASL settings checked)."""
    last = ""
    for addr in cfg.brokers.split(","):
        host, _, port_text = addr.strip().rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            last = f"address {addr}: missing port in address"
            continue
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=DIAL_TIMEOUT_S):
                break
        except OSError as exc:
            last = _go_dial_error(host, port, exc)
    else:
        raise SinkError(f"unable to dial: {last}")
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {**cfg.admin(), "logger": librdkafka_log}
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        text, _ = error_text(exc.args[0])
        raise SinkError(f"unable to dial: kafka sink {cfg.brokers}: {text}") from None


# ---------------------------------------------------------------------------------- producers
def producer_for(cfg: KafkaConfig) -> Any:
    """One producer per sink configuration and process (Spark reuses its Python workers)."""
    from confluent_kafka import Producer

    with _LOCK:
        p = _PRODUCERS.get(cfg)
        if p is None:
            p = Producer({**cfg.librdkafka(), "logger": librdkafka_log})
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


def forget_partitions(cfg: KafkaConfig, topic: str) -> None:
    with _LOCK:
        _PARTITIONS.pop((cfg, topic), None)


def topic_partitions(cfg: KafkaConfig, topic: str, *, refresh: bool = False) -> int:
    """The topic's partition count from the cluster's metadata. The metadata request asks for
    auto-creation (a producer's), as CockroachDB's sink relies on the brokers' default."""
    now = time.monotonic()
    with _LOCK:
        got = _PARTITIONS.get((cfg, topic))
    if got is not None and not refresh and now - got[1] < METADATA_REFRESH_S:
        return got[0]
    from confluent_kafka import KafkaError, KafkaException

    producer = producer_for(cfg)
    deadline = now + TOPIC_PROPAGATION_S
    while True:
        try:
            meta = producer.list_topics(
                topic, timeout=max(0.5, min(METADATA_TIMEOUT_S, deadline - time.monotonic()))
            )
        except KafkaException as exc:
            _drop_producer(cfg)
            text, retryable = error_text(exc.args[0])
            raise sink_error(cfg, f"connecting to kafka: {text}", retryable) from None
        info = meta.topics.get(topic)
        err = None if info is None else info.error
        if info is not None and err is None and info.partitions:
            n = len(info.partitions)
            with _LOCK:
                _PARTITIONS[(cfg, topic)] = (n, time.monotonic())
            return n
        if err is not None and err.code() not in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.LEADER_NOT_AVAILABLE,
        ):
            text, retryable = error_text(err)
            raise sink_error(cfg, f"topic {topic}: {text}", retryable)
        if time.monotonic() >= deadline:
            # Still unknown: auto-creation is off on this cluster (or the topic is being made).
            text, _ = (
                error_text(err) if err is not None else ("no partitions in the cluster's metadata", True)
            )
            raise sink_error(cfg, f"topic {topic}: {text}", False)
        time.sleep(0.1)


class KafkaWriter(SinkWriter):
    def __init__(self, config: KafkaConfig, job_id: int = 0) -> None:
        self.config = config
        self.job_id = job_id
        # A transaction lives in one producer: an exactly-once job appends from the driver.
        self.driver_only = config.exactly_once
        self._txn: Transactions | None = None

    def _transactions(self) -> Transactions:
        if self._txn is None:
            self._txn = Transactions(self.config, self.job_id)
        return self._txn

    # ------------------------------------------------------------------ SinkWriter
    def begin_batch(self, writer: str, batch_id: int) -> None:
        if self.config.exactly_once:
            self._transactions().begin(writer, batch_id)

    def commit_batch(self, writer: str, batch_id: int) -> None:
        if self.config.exactly_once:
            self._transactions().commit(writer, batch_id)

    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None:
        n = topic_partitions(self.config, topic)
        keyed = records.filter(records.column("key").is_valid())
        keys = keyed.column("key").to_pylist()
        values = keyed.column("value").to_pylist()
        stamps = keyed.column("ts").to_pylist()
        parts = partitions_for(keys, n, self.config.partition_alg)
        msgs = [(k, v, p, ts // 1_000_000) for k, v, p, ts in zip(keys, values, parts, stamps, strict=True)]
        if self.config.exactly_once:
            self._transactions().produce(writer, batch_id, topic, msgs)
        else:
            self.produce(topic, msgs)

    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None:
        n = topic_partitions(self.config, topic)
        msgs: list[tuple[bytes | None, bytes, int, int]] = [
            (None, payload, p, ts.wall // 1_000_000) for p in range(n)
        ]
        if self.config.exactly_once:
            self._transactions().produce(writer, batch_id, topic, msgs, whole=True)
        else:
            self.produce(topic, msgs)

    # ------------------------------------------------------------------ producing
    def produce(self, topic: str, msgs: Sequence[tuple[bytes | None, bytes, int, int]]) -> None:
        """Produce ``(key, value, partition, timestamp ms)`` messages; return once every one was
        acknowledged (raise SinkError on the first failure or on the delivery time-out)."""
        if not msgs:
            return
        from confluent_kafka import KafkaException

        cfg = self.config
        producer = producer_for(cfg)
        errors: list[tuple[str, bool]] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None and len(errors) < 5:
                text, retryable = error_text(err)
                key = msg.key()
                errors.append(
                    (
                        f"kafka: Failed to produce message to topic {topic}: {text} (key={key.decode(errors='replace') if key else ''}, "
                        f"size={len(key or b'') + len(msg.value() or b'')})",
                        retryable,
                    )
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
            text, retryable = error_text(exc.args[0])
            raise sink_error(cfg, f"topic {topic}: {text}", retryable) from None
        if errors or left:
            _drop_producer(cfg)  # an idempotent producer may be fenced after a failure: start afresh
            forget_partitions(cfg, topic)  # the partitions may have changed
            what, retryable = errors[0] if errors else (f"{left} messages not acknowledged", True)
            raise sink_error(cfg, what, retryable)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "job_id": self.job_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], state.get("job_id", 0))  # type: ignore[misc]
