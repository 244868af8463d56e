"""Spark source over the embedded topics: ``spark.read[Stream].format("changefeed")``, with
Spark's Kafka source as the model (its option names, defaults and data-loss rule).

Options (docs/pipeline.md lists every option of Spark's Kafka source and what stands for it here):

* ``path`` (or ``.load(dbdir)``): the database directory; ``topic`` (or ``subscribe``): the topic;
* ``startingOffsets``: ``earliest`` (default for batch), ``latest`` (default for streaming, as
  Spark's Kafka source) or JSON, ``{"0": 5, "1": -2}`` or Kafka's ``{"<topic>": {"0": 5}}``
  (``-2`` earliest, ``-1`` latest; partitions left out start at the earliest offset);
* ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (ms since the epoch, for all or per
  partition): the first record at or after the time; ``startingOffsetsByTimestampStrategy``:
  ``error`` (default) or ``latest`` where no record is that recent. Precedence as Spark's:
  startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets;
* ``endingOffsets`` / ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch only):
  ``latest`` (default), JSON or a time;
* ``maxOffsetsPerTrigger`` (or ``maxRecordsPerTrigger``, streaming): admission control, spread
  fairly over partitions;
* ``minPartitions``: at least this many Spark input partitions (offset ranges are split);
* ``failOnDataLoss`` (default ``true``): fail when offsets to read are gone (retention deleted
  them, or the topic was dropped); ``false`` skips to what is there;
* ``group`` (streaming): also record the offsets Spark committed as this consumer group's.

Rows: ``topic string, partition int, offset long, key binary, value binary, ts long,
write_time timestamp``. Streaming offsets are JSON dicts ``{"<partition>": <next offset>}``; a
micro-batch reads ``[start, end)`` of every partition. ``Trigger.AvailableNow`` is supported.
Reads yield Arrow record batches, one Spark input partition per topic partition (more with
``minPartitions``). Options are checked when the source is loaded (``.load()``), so a wrong one
or an unknown topic fails there, with one line (``changefeed.pipeline.spark.session``).
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


def _json_object(name: str, raw: str, topic: str) -> dict[str, Any]:
    """A JSON offsets/timestamps object: ``{"0": 5}`` or Kafka's ``{"<topic>": {"0": 5}}``."""
    try:
        obj = json.loads(raw)
    except ValueError:
        raise InvalidOption(
            f'option {name}: expected earliest, latest or a JSON object, got "{raw}"'
        ) from None
    if not isinstance(obj, dict):
        raise InvalidOption(f'option {name}: expected a JSON object {{"partition": offset}}, got "{raw}"')
    if obj and all(isinstance(v, dict) for v in obj.values()):  # Kafka's form, keyed by topic
        others = sorted(set(obj) - {topic})
        if others:
            raise InvalidOption(f'option {name}: topic "{others[0]}" is not the topic read ("{topic}")')
        inner = obj.get(topic, {})
        assert isinstance(inner, dict)
        return inner
    return obj


def _partition_map(name: str, obj: Mapping[str, Any], lowest: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for k, v in obj.items():
        try:
            p = int(k)
        except ValueError:
            raise InvalidOption(f'option {name}: partition "{k}" is not an integer') from None
        if isinstance(v, bool) or not isinstance(v, int) or v < lowest:
            raise InvalidOption(f"option {name}: the value for partition {k} must be an integer >= {lowest}")
        out[p] = v
    return out


def _parse_offsets_spec(name: str, raw: str | None, default: int, topic: str) -> int | dict[int, int]:
    """``earliest``/``latest`` -> EARLIEST/LATEST; a JSON object -> {partition: offset}."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() == "earliest":
        return EARLIEST
    if text.lower() == "latest":
        return LATEST
    return _partition_map(name, _json_object(name, text, topic), EARLIEST)


def _parse_bool(name: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise InvalidOption(f'option {name} must be true or false, got "{raw}"')


def _parse_positive(name: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n <= 0:
        raise InvalidOption(f'option {name} must be a positive integer, got "{raw}"')
    return n


#: Spark Kafka source options that have nothing to act on here (no network client, no headers):
#: accepted and ignored, as documented in docs/pipeline.md.
IGNORED = frozenset(
    o.lower()
    for o in ("kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs")
)
#: Spark Kafka source options not supported, with why.
UNSUPPORTED = {
    "assign": "one topic per source: name it with option topic (or subscribe)",
    "subscribepattern": "one topic per source: name it with option topic (or subscribe)",
    "includeheaders": "the embedded topics keep no record headers",
    "minoffsetspertrigger": "not supported; use maxOffsetsPerTrigger",
    "maxtriggerdelay": "not supported; use maxOffsetsPerTrigger",
}


class _Options:
    """Validated source options (picklable). ``streaming``: None when the mode is not known yet
    (the source's schema, asked at ``.load()``): everything but the mode's own rules is checked."""

    def __init__(self, options: Mapping[str, str], streaming: bool | None) -> None:
        path = _option(options, "path")
        if not path:
            raise InvalidOption(
                "the changefeed source needs a database directory: .load(dbdir) or option path"
            )
        for key in options:
            why = UNSUPPORTED.get(key.lower())
            if why is not None:
                raise InvalidOption(f"option {key}: {why}")
        topic = _option(options, "topic")
        subscribe = _option(options, "subscribe")
        if subscribe is not None and "," in subscribe:
            raise InvalidOption(
                f'option subscribe: one topic per source, got "{subscribe}" (read each topic with its own source)'
            )
        topic = topic or (subscribe.strip() if subscribe else None)
        if not topic:
            raise InvalidOption("the changefeed source needs option topic (or subscribe)")
        self.store = TopicStore(path)
        self.topic = topic
        info = self.store.topic(topic)  # fails early on an unknown topic
        self.partitions = info.partitions
        self.fail_on_data_loss = _parse_bool("failOnDataLoss", _option(options, "failOnDataLoss"), True)
        default = LATEST if streaming else EARLIEST
        self.starting = _parse_offsets_spec(
            "startingOffsets", _option(options, "startingOffsets"), default, topic
        )
        self.starting_times = self._times(options, "starting")
        strategy = (_option(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise InvalidOption(
                f'option startingOffsetsByTimestampStrategy must be error or latest, got "{strategy}"'
            )
        self.strategy = strategy
        ending_names = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
        if streaming and any(_option(options, n) is not None for n in ending_names):
            given = next(n for n in ending_names if _option(options, n) is not None)
            raise InvalidOption(f"option {given} is not valid in streaming queries")
        self.ending = _parse_offsets_spec("endingOffsets", _option(options, "endingOffsets"), LATEST, topic)
        self.ending_times = self._times(options, "ending")
        self.max_records = _parse_positive("maxOffsetsPerTrigger", _option(options, "maxOffsetsPerTrigger"))
        if self.max_records is None:
            self.max_records = _parse_positive(
                "maxRecordsPerTrigger", _option(options, "maxRecordsPerTrigger")
            )
        self.min_partitions = _parse_positive("minPartitions", _option(options, "minPartitions")) or 0
        self.group = _option(options, "group") or None
        for spec in (self.starting, self.ending, self.starting_times, self.ending_times):
            if isinstance(spec, dict):
                for p in spec:
                    if not 0 <= p < info.partitions:
                        raise TopicError(
                            f'partition {p} out of range for topic "{topic}" (partitions 0..{info.partitions - 1})'
                        )

    def _times(self, options: Mapping[str, str], side: str) -> int | dict[int, int] | None:
        """``<side>Timestamp`` (all partitions) or ``<side>OffsetsByTimestamp`` (JSON), in ms."""
        one = _option(options, f"{side}Timestamp")
        if one is not None:
            try:
                ms = int(one)
            except ValueError:
                ms = -1
            if ms < 0:
                raise InvalidOption(
                    f'option {side}Timestamp must be milliseconds since the epoch, got "{one}"'
                )
            return ms
        by = _option(options, f"{side}OffsetsByTimestamp")
        if by is None:
            return None
        return _partition_map(
            f"{side}OffsetsByTimestamp", _json_object(f"{side}OffsetsByTimestamp", by, self.topic), 0
        )

    def _by_time(self, times: int | dict[int, int], p: int, earliest: int, nxt: int, side: str) -> int:
        ms = times if isinstance(times, int) else times.get(p)
        if ms is None:
            return earliest if side == "starting" else nxt
        found = self.store.offset_for_time(self.topic, p, ms * 1_000_000)
        if found is not None:
            return found[0]
        if side == "starting" and self.strategy == "error":
            raise TopicError(
                f"No offset matched from request of topic-partition {self.topic}-{p} and timestamp {ms}"
                " (set option startingOffsetsByTimestampStrategy to latest to start at the end instead)"
            )
        return nxt

    def resolve(self, spec: int | dict[int, int], default: int, *, side: str = "starting") -> dict[int, int]:
        """Concrete offsets for every partition; an explicit offset whose records are gone fails
        with ``failOnDataLoss`` (the default), else starts at the earliest kept."""
        bounds = self.store.offsets(self.topic)
        times = self.starting_times if side == "starting" else self.ending_times
        out: dict[int, int] = {}
        for p, (earliest, nxt) in bounds.items():
            if times is not None:
                out[p] = self._by_time(times, p, earliest, nxt, side)
                continue
            want = spec if isinstance(spec, int) else spec.get(p, default)
            got = earliest if want == EARLIEST else nxt if want == LATEST else want
            if side == "starting" and got < earliest:
                self.check_loss(p, got, earliest)
                got = earliest
            out[p] = got
        return out

    def check_loss(self, partition: int, wanted: int, earliest: int) -> None:
        """Spark's Kafka source's data-loss rule, in its words."""
        if self.fail_on_data_loss:
            raise TopicError(
                f"Cannot fetch offset {wanted} (TopicPartition: {self.topic}-{partition}): the earliest "
                f"offset kept is {earliest}. Some data may have been lost because they are not available "
                "in the topic any more; either the data was aged out by its retention period or the topic "
                "may have been deleted before all the data in the topic was processed. If you don't want "
                'your streaming query to fail on such cases, set the source option "failOnDataLoss" to "false".'
            )


def _split(ranges: list[TopicInputPartition], at_least: int) -> list[TopicInputPartition]:
    """``minPartitions``: cut the longest offset ranges until there are ``at_least`` of them."""
    out = list(ranges)
    while 0 < len(out) < at_least:
        longest = max(out, key=lambda r: r.end - r.start)
        if longest.end - longest.start < 2:
            break
        mid = (longest.start + longest.end) // 2
        out.remove(longest)
        out += [
            TopicInputPartition(longest.partition, longest.start, mid),
            TopicInputPartition(longest.partition, mid, longest.end),
        ]
    return sorted(out, key=lambda r: (r.partition, r.start))


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
        end = self.opts.resolve(self.opts.ending, LATEST, side="ending")
        ranges = [TopicInputPartition(p, start[p], max(start[p], end[p])) for p in sorted(start)]
        return _split(ranges, self.opts.min_partitions)

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
        try:
            bounds = self.opts.store.offsets(self.opts.topic)
        except TopicError:
            if self.opts.fail_on_data_loss:
                raise  # the topic was dropped under the query
            return _to_json(begin)
        end: dict[int, int] = {}
        avail: dict[int, int] = {}
        eff_start: dict[int, int] = {}
        for p, (earliest, nxt) in bounds.items():
            s = begin.get(p, earliest)
            if s < earliest and nxt > s:
                self.opts.check_loss(p, s, earliest)
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
        ranges = [TopicInputPartition(p, s.get(p, 0), e[p]) for p in sorted(e) if e[p] > s.get(p, 0)]
        return _split(ranges, self.opts.min_partitions)

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
        _Options(self.options, streaming=None)  # at .load(): a wrong option fails there
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return TopicBatchReader(_Options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TopicStreamReader(_Options(self.options, streaming=True))
