"""Kafka APIs over the embedded topics: Metadata, ListOffsets, Fetch, Produce, InitProducerId
(the topic admin APIs are :mod:`topic_admin`'s). Each method parses its request version and
returns the response body (without the correlation id header)."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

from changefeed.engine.auth import ROOT
from changefeed.exceptions import ChangefeedError
from changefeed.server.kafka import errors as E, versions as V
from changefeed.server.kafka.authz import ADMIN, READ, WRITE
from changefeed.server.kafka.broker import Broker, FetchResult, ProduceResult
from changefeed.server.kafka.records import UnsupportedBatch, parse_batches
from changefeed.server.kafka.session import Session
from changefeed.server.kafka.wire import MalformedRequest, Reader, Writer, reader_for, writer_for
from changefeed.topics.store import DEFAULT_RETENTION_NS, TopicInfo

__all__ = ["TopicApis"]

#: Kafka's num.partitions default: the partitions of an auto-created topic.
AUTO_CREATE_PARTITIONS = 1
#: The largest record batch a Produce may carry, Kafka's default ``message.max.bytes``
#: (1 MiB of records and a batch header): a larger one is MESSAGE_TOO_LARGE, as a broker says
#: (the Java producer then raises RecordTooLargeException).
MAX_MESSAGE_BYTES = 1_048_588
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def is_kafka_topic_name(name: str) -> bool:
    """Kafka's rule for topic names: 1-249 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``."""
    return bool(_LEGAL_TOPIC.fullmatch(name)) and name not in (".", "..")


#: Long polls wake at least this often to see appends by other processes (the Spark pipeline).
_POLL_INTERVAL_S = 0.05
_MAX_WAIT_S = 30.0


class TopicApis:
    def __init__(self, broker: Broker, node_id: int, cluster_id: str) -> None:
        self.broker = broker
        self.node_id = node_id
        self.cluster_id = cluster_id

    # -- Metadata ----------------------------------------------------------------------------

    async def metadata(self, session: Session, version: int, r: Reader) -> bytes:
        names = r.nullable_array(Reader.string)
        # Kafka's auto.create.topics.enable (its default, true): a client that asks for it (a
        # producer; Metadata before v4 always asks) gets a missing topic created, so producing
        # to a new topic answers at once instead of after the client's metadata time-out.
        auto_create = r.boolean() if version >= 4 else True
        if version >= 8:
            r.boolean()
            r.boolean()
        b = self.broker
        user = session.user or ROOT

        def lookup(name: str) -> tuple[str, TopicInfo | None, int]:
            info, err = b.topic_for(user, name, READ)
            if err == E.UNKNOWN_TOPIC_OR_PARTITION and auto_create:
                info, err = self._auto_create(user, name)
            return name, info, err

        def describe() -> list[tuple[str, TopicInfo | None, int]]:
            if names is None or (version == 0 and not names):
                return [(t.name, t, E.NONE) for t in b.store.topics() if b.authz.allowed(user, t.name, READ)]
            return [lookup(n) for n in names]

        infos = await b.run(describe)
        w = Writer()
        if version >= 3:
            w.int32(0)
        w.int32(1).int32(self.node_id).string(session.host).int32(session.port)
        if version >= 1:
            w.string(None)  # rack
        if version >= 2:
            w.string(self.cluster_id)
        if version >= 1:
            w.int32(self.node_id)  # controller
        w.int32(len(infos))
        for name, info, err in infos:
            w.int16(err).string(name)
            if version >= 1:
                w.boolean(False)
            parts = info.partitions if info is not None else 0
            w.int32(parts)
            for p in range(parts):
                w.int16(E.NONE).int32(p).int32(self.node_id)
                if version >= 7:
                    w.int32(0)  # leader epoch
                w.int32(1).int32(self.node_id).int32(1).int32(self.node_id)
                if version >= 5:
                    w.int32(0)
            if version >= 8:
                w.int32(-2147483648)
        if version >= 8:
            w.int32(-2147483648)
        return w.getvalue()

    def _auto_create(self, user: str, name: str) -> tuple[TopicInfo | None, int]:
        """Runs in a worker thread: create ``name`` as Kafka's auto-creation does (num.partitions
        1, the default retention), for users who may create topics; a name Kafka would refuse is
        INVALID_TOPIC_EXCEPTION, a user who may not create topics TOPIC_AUTHORIZATION_FAILED."""
        b = self.broker
        if not is_kafka_topic_name(name):
            return None, E.INVALID_TOPIC_EXCEPTION
        if not b.authz.allowed(user, name, ADMIN):
            return None, E.TOPIC_AUTHORIZATION_FAILED
        try:
            return b.store.ensure_topic(name, AUTO_CREATE_PARTITIONS, DEFAULT_RETENTION_NS), E.NONE
        except ChangefeedError:
            return None, E.INVALID_TOPIC_EXCEPTION

    # -- ListOffsets -------------------------------------------------------------------------

    async def list_offsets(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.LIST_OFFSETS]
        r = reader_for(r, flexible)
        r.int32()  # replica id
        if version >= 2:
            r.int8()  # isolation level: every record is committed

        def part(r: Reader) -> tuple[int, int]:
            p = r.int32()
            if version >= 4:
                r.int32()  # current leader epoch
            ts = r.int64()
            r.tags()
            return p, ts

        def topic(r: Reader) -> tuple[str, list[tuple[int, int]]]:
            name = r.string()
            parts = r.array(part)
            r.tags()
            return name, parts

        topics = r.array(topic)
        if version >= 10:
            r.int32()  # timeout for tiered storage: nothing is tiered
        r.tags()
        b = self.broker
        user = session.user or ROOT
        seen = Counter((name, p) for name, parts in topics for p, _ in parts)

        def work() -> list[tuple[str, list[tuple[int, int, int, int]]]]:
            out = []
            for name, parts in topics:
                info, err = b.topic_for(user, name, READ)
                rows = []
                for p, ts in parts:
                    if seen[(name, p)] < 0:
                        continue  # a duplicate, answered once
                    if seen[(name, p)] > 1:
                        seen[(name, p)] = -1
                        rows.append((p, E.INVALID_REQUEST, -1, -1))
                    elif info is None:
                        rows.append((p, err, -1, -1))
                    elif ts < 0 and V.LIST_OFFSETS_SPECS.get(ts, 1 << 15) > version:
                        rows.append((p, E.UNSUPPORTED_VERSION, -1, -1))
                    else:
                        rows.append((p, *b.list_offset(info, p, ts)))
                out.append((name, rows))
            return out

        result = await b.run(work)
        w = writer_for(flexible)
        if version >= 2:
            w.int32(0)

        def row(w: Writer, it: tuple[int, int, int, int]) -> None:
            p, err, ts, off = it
            w.int32(p).int16(err).int64(ts).int64(off)
            if version >= 4:
                w.int32(-1 if off < 0 else 0)  # leader epoch: always 0, none for no offset
            w.tags()

        w.array(result, lambda w, t: w.string(t[0]).array(t[1], row).tags())
        return w.tags().getvalue()

    # -- Fetch -------------------------------------------------------------------------------

    async def fetch(self, session: Session, version: int, r: Reader) -> list[bytes | bytearray | memoryview]:
        r.int32()  # replica id
        max_wait_ms = r.int32()
        min_bytes = r.int32()
        max_bytes = r.int32()
        r.int8()  # isolation level
        if version >= 7:
            r.int32()  # session id: this endpoint keeps no fetch sessions (answers 0)
            r.int32()

        def part(r: Reader) -> tuple[int, int, int]:
            p = r.int32()
            if version >= 9:
                r.int32()
            offset = r.int64()
            if version >= 5:
                r.int64()
            return p, offset, r.int32()

        topics = r.array(lambda r: (r.string(), r.array(part)))
        if version >= 7:
            r.array(lambda r: (r.string(), r.array(Reader.int32)))
        if version >= 11:
            r.string()
        b = self.broker
        deadline = time.monotonic() + min(max(max_wait_ms, 0) / 1000, _MAX_WAIT_S)
        user = session.user or ROOT

        def work() -> tuple[int, list[tuple[str, list[tuple[int, FetchResult]]]]]:
            budget = max_bytes if max_bytes > 0 else 1 << 30
            total = 0
            out = []
            for name, parts in topics:
                info, err = b.topic_for(user, name, READ)
                rows = []
                for p, offset, pmax in parts:
                    if info is None:
                        res = FetchResult(err, -1, -1, None)
                    elif budget - total <= 0:
                        res = b.fetch_partition(info, p, offset, 0)
                        res = FetchResult(res.error, res.high_watermark, res.log_start, b"")
                    else:
                        res = b.fetch_partition(info, p, offset, max(1, min(pmax, budget - total)))
                        total += res.size
                    rows.append((p, res))
                out.append((name, rows))
            return total, out

        while True:
            total, result = await b.run(work)
            errors = any(res.error for _, rows in result for _, res in rows)
            left = deadline - time.monotonic()
            if total >= max(min_bytes, 1) or errors or left <= 0:
                break
            await b.wait_change(min(left, _POLL_INTERVAL_S))

        w = Writer().int32(0)
        if version >= 7:
            w.int16(E.NONE).int32(0)
        w.int32(len(result))
        for name, rows in result:
            w.string(name).int32(len(rows))
            for p, res in rows:
                w.int32(p).int16(res.error).int64(res.high_watermark).int64(res.high_watermark)
                if version >= 5:
                    w.int64(res.log_start)
                w.int32(-1)  # aborted transactions: none
                if version >= 11:
                    w.int32(-1)
                w.bytes_parts([res.records or b"", *res.more])  # empty records, never null
        return w.getparts()

    # -- Produce -----------------------------------------------------------------------------

    async def produce(self, session: Session, version: int, r: Reader) -> bytes | None:
        r.nullable_string()  # transactional id
        acks = r.int16()
        r.int32()  # timeout
        topics = r.array(lambda r: (r.string(), r.array(lambda r: (r.int32(), r.nullable_bytes()))))
        b = self.broker
        out: list[tuple[str, list[tuple[int, ProduceResult]]]] = []
        if acks not in (-1, 0, 1):
            out = [
                (n, [(p, ProduceResult(E.INVALID_REQUIRED_ACKS, -1, -1)) for p, _ in ps]) for n, ps in topics
            ]
        else:
            # Partitions are parsed and appended concurrently: each is its own SQLite file, and
            # SQLite releases the GIL while it writes.
            for name, parts in topics:
                info, err = await b.run(b.topic_for, session.user or ROOT, name, WRITE)
                if info is None:
                    results = [ProduceResult(err, -1, -1) for _ in parts]
                else:
                    results = await asyncio.gather(
                        *(self._produce_partition(info, p, d, version) for p, d in parts)
                    )
                out.append((name, list(zip((p for p, _ in parts), results, strict=True))))
            b.notify()
        if acks == 0:
            return None
        w = Writer().int32(len(out))
        for name, rows in out:
            w.string(name).int32(len(rows))
            for p, res in rows:
                w.int32(p).int16(res.error).int64(res.base_offset).int64(-1)
                if version >= 5:
                    w.int64(res.log_start)
                if version >= 8:
                    w.int32(0).string(res.message)
        w.int32(0)
        return w.getvalue()

    async def _produce_partition(
        self, info: TopicInfo, p: int, data: bytes | None, version: int
    ) -> ProduceResult:
        if not 0 <= p < info.partitions:
            return ProduceResult(E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)

        too_large = oversized_batch(data or b"")
        if too_large:
            return ProduceResult(
                E.MESSAGE_TOO_LARGE,
                -1,
                -1,
                f"The request included a message larger than the max message size the server will "
                f"accept ({too_large} > {MAX_MESSAGE_BYTES} bytes)",
            )

        def parse_and_append() -> ProduceResult:  # in a worker thread, off the event loop
            try:
                batches = parse_batches(data or b"", version)
            except MalformedRequest as exc:
                return ProduceResult(E.CORRUPT_MESSAGE, -1, -1, str(exc))
            except UnsupportedBatch as exc:
                return ProduceResult(exc.code, -1, -1, str(exc))
            return self.broker.append_batches(info, p, batches)

        async with self.broker.lock(info.name, p):
            return await self.broker.run(parse_and_append)

    async def init_producer_id(self, session: Session, version: int, r: Reader) -> bytes:
        txn = r.nullable_string()
        r.int32()
        w = Writer().int32(0)
        if txn is not None:
            return w.int16(E.INVALID_REQUEST).int64(-1).int16(-1).getvalue()
        pid = await self.broker.run(self.broker.producer_ids.next_id)
        return w.int16(E.NONE).int64(pid).int16(0).getvalue()


def oversized_batch(data: bytes) -> int:
    """The size of the first record batch in ``data`` larger than :data:`MAX_MESSAGE_BYTES`, or
    0 (each batch: base offset, then its length, then that many bytes; a malformed tail is left
    to the parser to refuse)."""
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if size > MAX_MESSAGE_BYTES:
            return size
        if size <= 12:
            return 0
        pos += size
    return 0
