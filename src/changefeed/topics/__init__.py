"""changefeed.topics: the embedded partitioned topic log.

A durable log under ``DB/topics/``: topics whose partitions only grow, atomic and idempotent
appends keyed by ``(writer, batch id)``, reads by partition and offset, consumer groups, and
time-based retention that deletes records without renumbering offsets.
"""

from changefeed.topics.consumer import Consumer
from changefeed.topics.store import (
    DEFAULT_RETENTION_NS,
    MAX_PARTITIONS,
    RECORD_SCHEMA,
    Record,
    TopicInfo,
    TopicLog,
    TopicStore,
)

__all__ = [
    "DEFAULT_RETENTION_NS",
    "MAX_PARTITIONS",
    "RECORD_SCHEMA",
    "Consumer",
    "Record",
    "TopicInfo",
    "TopicLog",
    "TopicStore",
]
