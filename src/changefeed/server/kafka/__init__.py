"""The Kafka protocol over the embedded topics (``changefeed serve --kafka HOST:PORT``).

Any Kafka client (librdkafka/confluent-kafka, kafka-python, aiokafka) consumes and produces:
see ``docs/kafka.md`` for the API versions, topic naming, authentication and guarantees.
"""

from __future__ import annotations

from changefeed.server import EndpointConfig
from changefeed.server.kafka.server import KafkaEndpoint

__all__ = ["KafkaEndpoint", "create"]


def create(
    config: EndpointConfig, *, allow_anonymous: bool | None = None, retention_check_ms: int | None = None
) -> KafkaEndpoint:
    """The endpoint, not yet started. Anonymous clients (no SASL) act as ``root`` and are
    allowed by default only when bound to loopback. Topic retention is applied every
    ``retention_check_ms`` (default: ``CHANGEFEED_KAFKA_RETENTION_CHECK_INTERVAL_MS``, else
    Kafka's 300,000 ms; see ``changefeed.server.kafka.retention``)."""
    return KafkaEndpoint(config, allow_anonymous=allow_anonymous, retention_check_ms=retention_check_ms)
