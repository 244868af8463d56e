"""A feed's micro-batches planned and committed by the driver, in its Spark checkpoint's own logs.

A Structured Streaming checkpoint keeps ``offsets/<batch id>`` (written before the batch runs:
``v1``, the batch's metadata with the session's relevant confs, the source's end offset) and
``commits/<batch id>`` (written once it is delivered). The runner delivers small micro-batches
on the driver without Spark (:mod:`changefeed.pipeline.runner`); it writes the same two
files in the same format, in the same order, with the same batch ids, so the checkpoint stays
one history: a Spark query started on it later (a large backlog, a schema change's backfill)
resumes after the driver's last batch, and re-runs a batch whose offsets are written but whose
commit is not, with the same offsets, exactly as it does after its own crash. The topic appends
are idempotent per (writer, batch id), so either side replaying a batch delivers nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

#: The ``conf`` of an offset log entry when the checkpoint has none yet: what this project's
#: Spark session records (``session.py``); Spark fills any missing conf with its default.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "spark.sql.streaming.join.stateFormatVersion": "2",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.aggregation.stateFormatVersion": "2",
    "spark.sql.shuffle.partitions": "4",
}
#: Log entries kept behind the latest (Spark's ``spark.sql.streaming.minBatchesToRetain``).
RETAIN = 100


def _ids(directory: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(directory) if n.isdigit())
    except FileNotFoundError:
        return []


def latest(checkpoint: Path, log: str) -> int | None:
    """The newest batch id of ``offsets`` or ``commits``, None when empty."""
    ids = _ids(checkpoint / log)
    return ids[-1] if ids else None


def read(checkpoint: Path, batch_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(metadata, source offset) of ``offsets/<batch_id>``, None when it is missing or torn."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        return dict(json.loads(lines[1])), dict(json.loads(lines[2]))
    except (OSError, IndexError, ValueError):
        return None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:  # no fsync, as Spark's own checkpoint files (a kill -9 keeps them)
        f.write(text)
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():  # Hadoop's checksum of an older file of that name would not match
        crc.unlink()
    os.replace(tmp, path)


def ensure_metadata(checkpoint: Path) -> None:
    """The checkpoint's query id file (Spark makes one when it starts a query on a new checkpoint)."""
    path = checkpoint / "metadata"
    if not path.exists():
        _write(path, json.dumps({"id": str(uuid.uuid4())}))


def write_offsets(checkpoint: Path, batch_id: int, offset: dict[str, Any]) -> None:
    """``offsets/<batch_id>``: planned, before any of its records is appended."""
    ensure_metadata(checkpoint)
    conf = DEFAULT_CONF
    prev = latest(checkpoint, "offsets")
    if prev is not None:
        got = read(checkpoint, prev)
        if got is not None and isinstance(got[0].get("conf"), dict):
            conf = got[0]["conf"]
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": conf}
    _write(
        checkpoint / "offsets" / str(batch_id),
        "v1\n" + json.dumps(meta, separators=(",", ":")) + "\n" + json.dumps(offset),
    )


def write_commit(checkpoint: Path, batch_id: int) -> None:
    """``commits/<batch_id>``: delivered."""
    _write(checkpoint / "commits" / str(batch_id), 'v1\n{"nextBatchWatermarkMs":0}')


def purge(checkpoint: Path, batch_id: int) -> None:
    """Drop log entries older than :data:`RETAIN` batches before ``batch_id`` (as Spark does)."""
    if batch_id % 20:
        return  # every 20 batches is often enough
    floor = batch_id - RETAIN
    for log in ("offsets", "commits"):
        for i in _ids(checkpoint / log):
            if i >= floor:
                break
            for name in (str(i), f".{i}.crc"):
                with contextlib.suppress(FileNotFoundError):
                    (checkpoint / log / name).unlink()
