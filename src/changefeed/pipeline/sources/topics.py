"""Spark source over the embedded topics: ``spark.read[Stream].format("changefeed")``.

Options:

* ``path`` (or ``.load(dbdir)``): the database directory; ``topic``: the topic name (required);
* ``startingOffsets``: ``earliest`` (default for batch), ``latest`` (default for streaming) or a
  JSON object ``{"0": 5, "1": 0}`` (partition -> first offset; ``-2`` earliest, ``-1`` latest;
  partitions left out start at the earliest offset);
* ``endingOffsets`` (batch only): ``latest`` (default) or a JSON object like ``startingOffsets``;
* ``maxRecordsPerTrigger`` (streaming): admission control, spread fairly over partitions;
* ``group`` (streaming): also record the offsets Spark committed as this consumer group's.

Rows: ``topic string, partition int, offset long, key binary, value binary, ts long,
write_time timestamp``. Streaming offsets are JSON dicts ``{"<partition>": <next offset>}``; a
micro-batch reads ``[start, end)`` of every partition. ``Trigger.AvailableNow`` is supported.
Reads yield Arrow record batches, one Spark input partition per topic partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from changefeed.exceptions import InvalidOption, TopicError
from changefeed.topics.store import TopicStore

__all__ = ["SCHEMA", "TopicDataSource", "TopicInputPartition"]

SCHEMA = "topic string, partition int, offset long, key binary, value binary, ts long, write_time timestamp"
ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("ts", pa.int64()),
        pa.field("write_time", pa.timestamp("us", tz="UTC")),
    ]
)
#: Offsets read from SQLite per Arrow batch handed to Spark.
CHUNK = 100_000
EARLIEST, LATEST = -2, -1


class TopicInputPartition(InputPartition):
    """Offsets ``[start, end)`` of one topic partition."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"TopicInputPartition({self.partition}, {self.start}, {self.end})"


def _option(options: Mapping[str, str], name: str) -> str | None:
    # Spark passes options case-insensitively; be tolerant of plain dicts too.
    for k, v in options.items():
        if k.lower() == name.lower():
            return v
    return None


def _parse_offsets_spec(name: str, raw: str | None, default: int) -> int | dict[int, int]:
    """``earliest``/``latest`` -> EARLIEST/LATEST; a JSON object -> {partition: offset}."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() == "earliest":
        return EARLIEST
    if text.lower() == "latest":
        return LATEST
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise InvalidOption(
            f"option {name}: expected earliest, latest or a JSON object, got {raw!r}"
        ) from exc
    if not isinstance(obj, dict):
        raise InvalidOption(f"option {name}: expected a JSON object {{partition: offset}}, got {raw!r}")
    out: dict[int, int] = {}
    for k, v in obj.items():
        try:
            p = int(k)
        except ValueError as exc:
            raise InvalidOption(f"option {name}: partition {k!r} is not an integer") from exc
        if isinstance(v, bool) or not isinstance(v, int) or v < EARLIEST:
            raise InvalidOption(
                f"option {name}: offset for partition {k} must be an integer >= -2, got {v!r}"
            )
        out[p] = v
    return out


class _Options:
    """Validated source options (picklable)."""

    def __init__(self, options: Mapping[str, str], streaming: bool) -> None:
        path = _option(options, "path")
        if not path:
            raise InvalidOption(
                "the changefeed source needs a database directory: .load(dbdir) or option path"
            )
        topic = _option(options, "topic")
        if not topic:
            raise InvalidOption("the changefeed source needs option topic")
        self.store = TopicStore(path)
        self.topic = topic
        self.starting = _parse_offsets_spec(
            "startingOffsets", _option(options, "startingOffsets"), LATEST if streaming else EARLIEST
        )
        self.ending = _parse_offsets_spec("endingOffsets", _option(options, "endingOffsets"), LATEST)
        raw_max = _option(options, "maxRecordsPerTrigger")
        self.max_records: int | None = None
        if raw_max is not None:
            try:
                self.max_records = int(raw_max)
            except ValueError:
                self.max_records = 0
            if self.max_records <= 0:
                raise InvalidOption(
                    f"option maxRecordsPerTrigger must be a positive integer, got {raw_max!r}"
                )
        self.group = _option(options, "group") or None
        info = self.store.topic(topic)  # fails early on an unknown topic
        self.partitions = info.partitions
        for spec in (self.starting, self.ending):
            if isinstance(spec, dict):
                for p in spec:
                    if not 0 <= p < info.partitions:
                        raise TopicError(
                            f"partition {p} out of range for topic {topic!r} (partitions 0..{info.partitions - 1})"
                        )

    def resolve(self, spec: int | dict[int, int], default: int) -> dict[int, int]:
        """Concrete offsets for every partition."""
        bounds = self.store.offsets(self.topic)
        out: dict[int, int] = {}
        for p, (earliest, nxt) in bounds.items():
            want = spec if isinstance(spec, int) else spec.get(p, default)
            out[p] = earliest if want == EARLIEST else nxt if want == LATEST else want
        return out


def _read_range(store: TopicStore, topic: str, part: TopicInputPartition) -> Iterator[pa.RecordBatch]:
    topic_scalar = pa.scalar(topic, pa.string())
    part_scalar = pa.scalar(part.partition, pa.int32())
    for lo in range(part.start, part.end, CHUNK):
        table = store.read_arrow(topic, part.partition, lo, min(lo + CHUNK, part.end))
        n = table.num_rows
        if n == 0:
            continue
        write_time = pc.divide(table.column("write_time"), 1000).cast(pa.timestamp("us", tz="UTC"))
        out = pa.Table.from_arrays(
            [
                pa.repeat(topic_scalar, n),
                pa.repeat(part_scalar, n),
                table.column("offset"),
                table.column("key"),
                table.column("value"),
                table.column("ts"),
                write_time,
            ],
            schema=ARROW_SCHEMA,
        )
        yield from out.to_batches()


class TopicBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        start = self.opts.resolve(self.opts.starting, EARLIEST)
        end = self.opts.resolve(self.opts.ending, LATEST)
        return [TopicInputPartition(p, start[p], max(start[p], end[p])) for p in sorted(start)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TopicInputPartition)
        return _read_range(self.opts.store, self.opts.topic, partition)


def _to_json(offsets: Mapping[int, int]) -> dict[str, int]:
    return {str(p): int(o) for p, o in sorted(offsets.items())}


def _from_json(offsets: Mapping[str, Any]) -> dict[int, int]:
    return {int(p): int(o) for p, o in offsets.items()}


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self._target: dict[int, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return _to_json(self.opts.resolve(self.opts.starting, EARLIEST))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records is not None:
            return ReadMaxRows(self.opts.max_records)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {p: nxt for p, (_, nxt) in self.opts.store.offsets(self.opts.topic).items()}

    def reportLatestOffset(self) -> dict[str, int]:
        return _to_json({p: nxt for p, (_, nxt) in self.opts.store.offsets(self.opts.topic).items()})

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        begin = _from_json(start)
        bounds = self.opts.store.offsets(self.opts.topic)
        end: dict[int, int] = {}
        avail: dict[int, int] = {}
        eff_start: dict[int, int] = {}
        for p, (earliest, nxt) in bounds.items():
            s = begin.get(p, earliest)
            top = nxt if self._target is None else min(nxt, self._target.get(p, nxt))
            end[p] = max(s, top)
            eff_start[p] = max(s, earliest)
            avail[p] = max(0, top - eff_start[p])
        if isinstance(limit, ReadMaxRows):
            take = _water_fill(avail, int(limit.max_rows))
            for p in bounds:
                end[p] = eff_start[p] + take[p] if take[p] else begin.get(p, bounds[p][0])
        return _to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        s, e = _from_json(start), _from_json(end)
        return [TopicInputPartition(p, s.get(p, 0), e[p]) for p in sorted(e) if e[p] > s.get(p, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TopicInputPartition)
        return _read_range(self.opts.store, self.opts.topic, partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self.opts.group is not None:
            self.opts.store.commit_offsets(self.opts.group, self.opts.topic, _from_json(end))


def _water_fill(avail: Mapping[int, int], budget: int) -> dict[int, int]:
    """Split ``budget`` rows over partitions as evenly as their availability allows."""
    take = dict.fromkeys(avail, 0)
    active = sorted(p for p, n in avail.items() if n > 0)
    left = max(0, budget)
    while left > 0 and active:
        share = max(1, left // len(active))
        nxt = []
        for p in active:
            if left <= 0:
                break
            t = min(share, avail[p] - take[p], left)
            take[p] += t
            left -= t
            if take[p] < avail[p]:
                nxt.append(p)
        active = nxt
    return take


class TopicDataSource(DataSource):
    """``format("changefeed")``: the embedded topics as a batch or streaming Spark source."""

    @classmethod
    def name(cls) -> str:
        return "changefeed"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return TopicBatchReader(_Options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TopicStreamReader(_Options(self.options, streaming=True))
