"""Sink writers: where a CockroachDB job's encoded records go when its sink is not the embedded
topic log (``kafka://``, ``webhook-https://`` or cloud storage).

A sink writer has the topic store's append shape, so the streaming query (``stream/query.py``) and the
initial scan (``snapshot/scan.py``) deliver through either without knowing which:

* ``append(topic, partition, writer, batch_id, records)``: one topic partition's records of one
  micro-batch (``key, value, ts``), in commit order; it returns only once the sink holds them
  (the endpoint acknowledged them, the files are renamed into place), and raises otherwise, so
  the job's checkpoint never advances past undelivered data;
* ``emit_resolved(topic, writer, batch_id, payload, ts)``: called after every partition's append
  of the batch returned, so a resolved message never overtakes the data it covers;
* ``begin_batch(writer, batch_id)`` / ``commit_batch(writer, batch_id)``: around a micro-batch's
  appends and resolved message (the streaming query's, an initial-scan group's); a
  transactional writer (Kafka with ``exactly_once``) writes the batch atomically, and the job
  records its progress only after the commit.

Writers are picklable (they travel to the executors inside ``mapInArrow``); ``driver_only``
writers (Hadoop file systems reached through the driver's JVM) are called on the driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from changefeed.pipeline.sinks.base import SinkWriter

if TYPE_CHECKING:
    from changefeed.engine.catalog import TableSchema
    from changefeed.feeds.spec import FeedSpec
    from changefeed.topics.store import TopicStore


def open_delivery(db: Path, feed: FeedSpec, table: TableSchema | None = None) -> TopicStore | SinkWriter:
    """The topic store, or the sink writer of the job ``feed`` belongs to."""
    from changefeed.feeds.kafka_config import KafkaConfig
    from changefeed.feeds.sinks import (
        CloudStorageConfig,
        WebhookConfig,
        parse_sink_uri,
        validate_sink_options,
    )
    from changefeed.topics.store import TopicStore

    if feed.kind != "crdb":
        return TopicStore(db)
    from changefeed.pipeline.crdb_jobs import job_of_feeds

    job = job_of_feeds(db).get(feed.id)
    if job is None or not job.sink:
        return TopicStore(db)
    sink = parse_sink_uri(job.sink)
    config = validate_sink_options(sink, job.options)
    if isinstance(config, WebhookConfig):
        from changefeed.pipeline.sinks.webhook import WebhookWriter

        return WebhookWriter(config)
    if isinstance(config, KafkaConfig):
        from changefeed.pipeline.sinks.kafka import KafkaWriter

        return KafkaWriter(config, job.id)
    if isinstance(config, CloudStorageConfig):
        from changefeed.pipeline.sinks.cloudstorage import open_cloud_storage

        version = table.version if table is not None else 1
        layout = None
        if config.extension == ".parquet":
            from changefeed.formats.crdb_parquet import ParquetLayout

            if table is None:
                from changefeed.engine.database import Database

                database = Database(db, create=False)
                try:
                    table = database.table_by_id(feed.table_id)
                finally:
                    database.close()
            layout = ParquetLayout.of(table, feed)
        return open_cloud_storage(db, config, schema_version=version, family=feed.family, parquet=layout)
    return TopicStore(db)


__all__ = ["SinkWriter", "open_delivery"]
