"""What the Kafka sink's writers share: CockroachDB's words for librdkafka's errors (and whether
the job retries them), and librdkafka's log lines through :mod:`logging`, rate-limited."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from changefeed.exceptions import SinkError
from changefeed.feeds.kafka_config import KafkaConfig
from changefeed.pipeline.sinks.base import RETRYABLE

__all__ = ["RateLimitedLog", "error_text", "librdkafka_limit", "librdkafka_log", "short", "sink_error"]


class RateLimitedLog(logging.Filter):
    """At most ``burst`` lines per ``window_s`` seconds; the rest are counted and reported in one
    line when the next window opens ("N similar librdkafka lines suppressed")."""

    def __init__(self, burst: int = 5, window_s: float = 60.0) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._start = 0.0
        self._count = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._start, self._count, self._dropped = 0.0, 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._start >= self.window_s:
                if self._dropped:
                    record.msg = (
                        f"{record.getMessage()} ({self._dropped} similar librdkafka lines suppressed)"
                    )
                    record.args = None
                self._start, self._count, self._dropped = now, 0, 0
            self._count += 1
            if self._count > self.burst:
                self._dropped += 1
                return False
            return True


#: librdkafka's own log lines (connection failures...): through logging, at most 5 a minute.
librdkafka_log = logging.getLogger("changefeed.pipeline.sinks.kafka.librdkafka")
librdkafka_limit = RateLimitedLog()
librdkafka_log.addFilter(librdkafka_limit)


def short(err: Any) -> str:
    text = err.str() if hasattr(err, "str") else str(err)
    return str(text).strip()


def error_text(err: Any) -> tuple[str, bool]:
    """(CockroachDB's words for a librdkafka error, retryable?). The brokers' refusals take
    sarama's texts (CockroachDB's Kafka sink); local and transport failures are retryable."""
    from confluent_kafka import KafkaError

    code = err.code() if hasattr(err, "code") else None
    terminal = {
        KafkaError.MSG_SIZE_TOO_LARGE: (
            "kafka server: Message was too large, server rejected it to avoid allocation error"
        ),
        KafkaError.TOPIC_AUTHORIZATION_FAILED: "kafka server: The client is not authorized to access this topic",
        KafkaError.CLUSTER_AUTHORIZATION_FAILED: (
            "kafka server: The client is not authorized to send this request type"
        ),
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (
            "kafka server: The client is not authorized to use this transactional ID"
        ),
        KafkaError.UNKNOWN_TOPIC_OR_PART: (
            "kafka server: Request was for a topic or partition that does not exist on this broker"
        ),
        KafkaError._UNKNOWN_TOPIC: (
            "kafka server: Request was for a topic or partition that does not exist on this broker"
        ),
        KafkaError.TOPIC_EXCEPTION: (
            "kafka server: The request attempted to perform an operation on an invalid topic"
        ),
        KafkaError.SASL_AUTHENTICATION_FAILED: f"kafka server: SASL Authentication failed: {short(err)}",
        KafkaError._AUTHENTICATION: f"kafka: SASL authentication failed: {short(err)}",
    }
    if code in terminal:
        return terminal[code], False
    return short(err), True


def sink_error(cfg: KafkaConfig, what: str, retryable: bool) -> SinkError:
    return SinkError(f"{RETRYABLE if retryable else ''}kafka sink {cfg.brokers}: {what}")
