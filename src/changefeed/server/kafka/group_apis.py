"""Kafka consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch. Membership is the in-memory :class:`Coordinator`; committed offsets
are the embedded topic log's group offsets (what ``changefeed read --group`` uses too)."""

from __future__ import annotations

from changefeed.engine.auth import ROOT
from changefeed.exceptions import ChangefeedError
from changefeed.server.kafka import errors as E
from changefeed.server.kafka.authz import READ
from changefeed.server.kafka.broker import Broker
from changefeed.server.kafka.session import Session
from changefeed.server.kafka.wire import Reader, Writer

__all__ = ["GroupApis"]


class GroupApis:
    def __init__(self, broker: Broker, node_id: int) -> None:
        self.broker = broker
        self.node_id = node_id
        self.coordinator = broker.coordinator

    async def find_coordinator(self, session: Session, version: int, r: Reader) -> bytes:
        r.string()
        if version >= 1:
            r.int8()
        w = Writer()
        if version >= 1:
            w.int32(0).int16(E.NONE).string(None)
        else:
            w.int16(E.NONE)
        return w.int32(self.node_id).string(session.host).int32(session.port).getvalue()

    async def join_group(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        session_timeout = r.int32()
        rebalance_timeout = r.int32() if version >= 1 else session_timeout
        member_id = r.string()
        if version >= 5:
            r.nullable_string()  # static membership is not supported: members are dynamic
        protocol_type = r.string()
        protocols = r.array(lambda r: (r.string(), r.bytes_()))
        if not group_id:
            res_error, gen, proto, leader, mid, members = E.INVALID_GROUP_ID, -1, "", "", member_id, []
        else:
            res = await self.coordinator.join(
                group_id,
                member_id,
                session.client_id,
                session.client_host,
                session_timeout,
                rebalance_timeout,
                protocol_type,
                protocols,
            )
            res_error, gen, proto, leader, mid, members = (
                res.error,
                res.generation,
                res.protocol,
                res.leader,
                res.member_id,
                res.members,
            )
        w = Writer()
        if version >= 2:
            w.int32(0)
        w.int16(res_error).int32(gen).string(proto).string(leader).string(mid).int32(len(members))
        for m, meta in members:
            w.string(m)
            if version >= 5:
                w.string(None)
            w.bytes_(meta)
        return w.getvalue()

    async def sync_group(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        generation = r.int32()
        member_id = r.string()
        if version >= 3:
            r.nullable_string()
        assignments = r.array(lambda r: (r.string(), r.bytes_()))
        error, assignment = await self.coordinator.sync(group_id, generation, member_id, assignments)
        w = Writer()
        if version >= 1:
            w.int32(0)
        return w.int16(error).bytes_(assignment).getvalue()

    async def heartbeat(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        generation = r.int32()
        member_id = r.string()
        if version >= 3:
            r.nullable_string()
        error = self.coordinator.heartbeat(group_id, generation, member_id)
        w = Writer()
        if version >= 1:
            w.int32(0)
        return w.int16(error).getvalue()

    async def leave_group(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        member_id = r.string()
        error = self.coordinator.leave(group_id, member_id)
        w = Writer()
        if version >= 1:
            w.int32(0)
        return w.int16(error).getvalue()

    async def offset_commit(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        generation = r.int32()
        member_id = r.string()
        if version >= 7:
            r.nullable_string()
        if 2 <= version <= 4:
            r.int64()  # retention time

        def part(r: Reader) -> tuple[int, int]:
            p = r.int32()
            off = r.int64()
            if version >= 6:
                r.int32()
            r.nullable_string()  # metadata
            return p, off

        topics = r.array(lambda r: (r.string(), r.array(part)))
        error = (
            E.INVALID_GROUP_ID
            if not group_id
            else self.coordinator.check_generation(group_id, generation, member_id)
        )
        b = self.broker

        user = session.user or ROOT

        def commit(name: str, parts: list[tuple[int, int]]) -> int:
            info, err = b.topic_for(user, name, READ)
            if info is None:
                return err
            if any(not 0 <= p < info.partitions for p, _ in parts):
                return E.UNKNOWN_TOPIC_OR_PARTITION
            try:
                b.store.commit_offsets(group_id, info.name, {p: max(0, off) for p, off in parts})
            except ChangefeedError:
                return E.UNKNOWN_SERVER_ERROR
            return E.NONE

        results = []
        for name, parts in topics:
            err = error if error != E.NONE else await b.run(commit, name, parts)
            results.append((name, [(p, err) for p, _ in parts]))
        w = Writer()
        if version >= 3:
            w.int32(0)
        w.int32(len(results))
        for name, rows in results:
            w.string(name).int32(len(rows))
            for p, err in rows:
                w.int32(p).int16(err)
        return w.getvalue()

    async def offset_fetch(self, session: Session, version: int, r: Reader) -> bytes:
        group_id = r.string()
        topics = r.nullable_array(lambda r: (r.string(), r.array(Reader.int32)))
        b = self.broker
        user = session.user or ROOT

        def work() -> list[tuple[str, list[tuple[int, int, int]]]]:
            wanted = topics
            if wanted is None:
                wanted = [(t.name, list(range(t.partitions))) for t in b.store.topics()]
            out = []
            for name, parts in wanted:
                info, err = b.topic_for(user, name, READ)
                if info is None:
                    out.append((name, [(p, -1, err) for p in parts]))
                    continue
                committed = b.store.committed_offsets(group_id, info.name)
                if topics is None:
                    parts = sorted(committed)
                out.append((name, [(p, committed.get(p, -1), E.NONE) for p in parts]))
            return [t for t in out if t[1] or topics is not None]

        result = await b.run(work)
        w = Writer()
        if version >= 3:
            w.int32(0)
        w.int32(len(result))
        for name, rows in result:
            w.string(name).int32(len(rows))
            for p, off, err in rows:
                w.int32(p).int64(off)
                if version >= 5:
                    w.int32(-1)
                w.string("").int16(err)
        if version >= 2:
            w.int16(E.NONE)
        return w.getvalue()
