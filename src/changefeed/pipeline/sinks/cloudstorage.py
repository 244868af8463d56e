"""CockroachDB's cloud-storage sink: NDJSON (or CSV) files in CockroachDB's layout.

``nodelocal://1/PATH`` writes under ``DIR/extern/PATH`` from the Spark executors (one task per
topic partition, in parallel); every other scheme (``s3://`` -> Hadoop's ``s3a``, ``gs://``,
``azure://`` -> ``abfss``...) goes through the Hadoop ``FileSystem`` of the driver's JVM, which
works wherever the scheme's connector is on Spark's classpath (``spark.jars.packages``) and
fails the job with a clear error where it is not.

Layout (``sink_cloudstorage.go``)::

    <partition dir>/<ts>-<session>-<node>-<sink>-<file id %08x>-<topic>-<schema id %x><ext>
    <partition dir>/<ts>.RESOLVED

``<ts>`` is ``YYYYMMDDHHMMSS`` + 9 digits of nanoseconds + 10 digits of logical clock (33
characters) of the file's first message, in UTC; the partition directory is ``YYYY-MM-DD/``
(daily), ``YYYY-MM-DD/HH/`` (hourly) or nothing (flat) of the same timestamp. ``<session>`` is
16 hex digits derived from the delivering writer (feed, checkpoint epoch, scan or stream), node
is 1, ``<sink>`` the topic partition, ``<file id>`` grows with the micro-batch id and the file's
index within it; ``<ext>`` is ``.ndjson``/``.csv`` plus ``.gz``/``.zst`` with ``compression``,
or ``.parquet`` (``format = parquet``: the compression is the file's own). A file holds one
message per line (a parquet file one row per message, :func:`changefeed.formats.crdb_parquet.
parquet_file`) and is cut once its messages pass ``file_size`` bytes.

Durability: each file is written under a temporary dot-name in its directory, flushed and
fsynced, then renamed into place, so a crash never leaves a partial file under a data-file name.
A replayed micro-batch writes the very same names (same session, batch id, partition, first
timestamp), replacing the files with identical content: delivery is exactly once. The resolved
file is written only after every partition's files of the batch are in place.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed.durable_files import write_durably
from changefeed.exceptions import SinkError
from changefeed.feeds.sinks import PARTITION_FORMATS, CloudStorageConfig
from changefeed.pipeline.sinks.base import SinkWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs
    from changefeed.formats.crdb_parquet import ParquetLayout

EXTERN_DIR = "extern"
NODE_ID = 1
#: Hadoop file-system schemes for CockroachDB's cloud-storage schemes.
HADOOP_SCHEMES = {
    "s3": "s3a",
    "experimental-s3": "s3a",
    "gs": "gs",
    "experimental-gs": "gs",
    "azure": "abfss",
    "azure-blob": "abfss",
    "azure-storage": "abfss",
    "experimental-azure": "abfss",
}

#: CockroachDB's provider query parameters -> the Hadoop connector's configuration keys.
HADOOP_KEYS = {
    "AWS_ACCESS_KEY_ID": "fs.s3a.access.key",
    "AWS_SECRET_ACCESS_KEY": "fs.s3a.secret.key",
    "AWS_SESSION_TOKEN": "fs.s3a.session.token",
    "AWS_ENDPOINT": "fs.s3a.endpoint",
    "AWS_REGION": "fs.s3a.endpoint.region",
}


def format_time(wall: int, logical: int = 0) -> str:
    """``cloudStorageFormatTime``: 14 digits of UTC date-time, 9 of nanoseconds, 10 of logical."""
    secs, ns = divmod(wall, 1_000_000_000)
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=secs)
    return f"{t:%Y%m%d%H%M%S}{ns:09d}{logical:010d}"


def partition_dir(wall: int, partition_format: str) -> str:
    t = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall // 1_000_000_000)
    return t.strftime(PARTITION_FORMATS[partition_format])


def session_id(writer: str) -> str:
    return hashlib.sha256(writer.encode()).hexdigest()[:16]


def file_topic(topic: str, family: str | None = None) -> str:
    """The topic as a file name shows it: a family topic ``table.family`` is ``table+family``
    (CockroachDB's cloud-storage naming; Kafka and the embedded topics keep the dot)."""
    if family is not None and topic.endswith("." + family):
        topic = topic[: -len(family) - 1] + "+" + family
    return topic.replace("/", "_")


class CloudStorageWriter(SinkWriter):
    """Writes through a file-system backend (local directory or Hadoop)."""

    def __init__(
        self,
        config: CloudStorageConfig,
        schema_version: int,
        family: str | None = None,
        parquet: ParquetLayout | None = None,
    ) -> None:
        self.config = config
        self.schema_version = schema_version
        self.family = family
        self.parquet = parquet  # format = parquet: the files' columns

    # ------------------------------------------------------------------ backend
    def write_file(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ layout
    def compress(self, body: bytes) -> bytes:
        if self.config.compression == "gzip":
            return gzip.compress(body, mtime=0)
        if self.config.compression == "zstd":
            import zstandard

            return zstandard.ZstdCompressor().compress(body)
        return body

    def file_name(self, wall: int, writer: str, partition: int, file_id: int, topic: str) -> str:
        cfg = self.config
        return (
            f"{partition_dir(wall, cfg.partition_format)}{format_time(wall)}-{session_id(writer)}-{NODE_ID}-"
            f"{partition}-{file_id:08x}-{file_topic(topic, self.family)}-{self.schema_version:x}{cfg.extension}"
        )

    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        records = records.filter(pc.is_valid(records.column("key")))
        n = records.num_rows
        if n == 0:
            return
        if self.parquet is not None:
            self._append_parquet(topic, partition, writer, batch_id, records)
            return
        # every message + "\n", as one Arrow buffer; files are byte ranges of it
        lines = pc.binary_join_element_wise(
            records.column("value").combine_chunks().cast(pa.large_binary()),
            pa.scalar(b"\n", pa.large_binary()),
            pa.scalar(b"", pa.large_binary()),
        )
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + n + 1]
        data = lines.buffers()[2]
        ts = records.column("ts").to_numpy()
        start, index = 0, 0
        while start < n:
            end = min(n, int(np.searchsorted(offsets, offsets[start] + self.config.file_size, side="left")))
            end = max(end, start + 1)
            body = data[int(offsets[start]) : int(offsets[end])].to_pybytes()
            self._flush(body, int(ts[start]), writer, partition, batch_id, index, topic)
            start, index = end, index + 1

    def _append_parquet(
        self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table
    ) -> None:
        """``format = parquet``: one file per ``file_size`` bytes of messages."""
        from changefeed.formats.crdb_parquet import parquet_file

        assert self.parquet is not None
        values = records.column("value").to_pylist()
        ts = records.column("ts").to_pylist()
        start, index, size = 0, 0, 0
        for i, v in enumerate(values):
            size += len(v)
            if size >= self.config.file_size or i == len(values) - 1:
                body = parquet_file(values[start : i + 1], self.parquet, self.config.compression)
                file_id = (batch_id << 12) | min(index, 0xFFF)
                self.write_file(self.file_name(int(ts[start]), writer, partition, file_id, topic), body)
                start, index, size = i + 1, index + 1, 0

    def _flush(
        self, body: bytes, wall: int, writer: str, partition: int, batch_id: int, index: int, topic: str
    ) -> None:
        file_id = (batch_id << 12) | min(index, 0xFFF)
        self.write_file(self.file_name(wall, writer, partition, file_id, topic), self.compress(body))

    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None:
        rel = f"{partition_dir(ts.wall, self.config.partition_format)}{format_time(ts.wall, ts.logical)}.RESOLVED"
        self.write_file(rel, payload)


class LocalWriter(CloudStorageWriter):
    """``nodelocal://1/PATH``: files under ``DIR/extern/PATH``."""

    def __init__(
        self,
        root: Path,
        config: CloudStorageConfig,
        schema_version: int,
        family: str | None = None,
        parquet: ParquetLayout | None = None,
    ) -> None:
        super().__init__(config, schema_version, family, parquet)
        self.root = str(root)

    def write_file(self, rel: str, data: bytes) -> None:
        write_durably(os.path.join(self.root, rel), data)


class HadoopWriter(CloudStorageWriter):
    """Any other scheme: the Hadoop FileSystem of the driver's JVM (create a temporary, rename)."""

    driver_only = True

    def __init__(
        self,
        config: CloudStorageConfig,
        schema_version: int,
        family: str | None = None,
        parquet: ParquetLayout | None = None,
    ) -> None:
        super().__init__(config, schema_version, family, parquet)
        base = config.base
        scheme = config.scheme
        self.base = (
            HADOOP_SCHEMES.get(scheme, scheme) + base[len(scheme) :] if base.startswith(scheme) else base
        )

    def _fs(self, path: str) -> tuple[Any, Any, Any]:  # (jvm, FileSystem, Path)
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            raise SinkError(
                f"cloud storage sink {self.base}: needs the Spark driver's JVM (run it with changefeed run)"
            )
        jvm: Any = sc._jvm
        conf = sc._jsc.hadoopConfiguration()
        for k, v in self.config.hadoop_conf:
            if k in HADOOP_KEYS:
                conf.set(HADOOP_KEYS[k], v)
        p = jvm.org.apache.hadoop.fs.Path(path)
        try:
            fs = p.getFileSystem(conf)
        except Exception as exc:
            raise SinkError(
                f"cloud storage sink {self.config.scheme}://: no Hadoop file system for {path.split(':', 1)[0]}:// on "
                f"Spark's classpath ({str(exc).splitlines()[0][:200]}); add its connector (e.g. "
                "spark.jars.packages=org.apache.hadoop:hadoop-aws for s3) or use nodelocal://1/PATH"
            ) from None
        return jvm, fs, p

    def write_file(self, rel: str, data: bytes) -> None:
        final = self.base.rstrip("/") + "/" + rel
        d, name = final.rsplit("/", 1)
        jvm, fs, target = self._fs(final)
        tmp = jvm.org.apache.hadoop.fs.Path(f"{d}/.{name}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if fs.exists(target):
            fs.delete(target, False)
        if not fs.rename(tmp, target):
            raise SinkError(f"cloud storage sink: could not rename {tmp} to {final}")


def open_cloud_storage(
    db: Path,
    config: CloudStorageConfig,
    schema_version: int = 1,
    family: str | None = None,
    parquet: ParquetLayout | None = None,
) -> CloudStorageWriter:
    if config.nodelocal:
        return LocalWriter(
            Path(db).absolute() / EXTERN_DIR / config.base, config, schema_version, family, parquet
        )
    return HadoopWriter(config, schema_version, family, parquet)
