"""Kafka's consumer-group admin APIs: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

What ``kafka-consumer-groups --list/--describe/--reset-offsets/--delete/--delete-offsets``,
confluent-kafka's ``list_consumer_groups``/``describe_consumer_groups``/``delete_consumer_groups``,
kafka-python's ``list_groups``/``describe_groups``/``delete_groups``/``delete_group_offsets`` and
lag monitors call (lag itself is OffsetFetch and ListOffsets, in :mod:`group_apis` and
:mod:`topic_apis`).

A group exists while it has committed offsets (the topic log's, durable) or the coordinator
knows it (it had members since the endpoint started), until DeleteGroups removes it: as a
Kafka group, empty or not, lives until it is deleted or its offsets expire.
Its state is Kafka's: ``Empty`` with offsets and no members, else the coordinator's
(``PreparingRebalance``, ``CompletingRebalance``, ``Stable``); a group that does not exist is
described as ``Dead`` (DescribeGroups) or ``GROUP_ID_NOT_FOUND`` (DeleteGroups, OffsetDelete).

Privileges: listing and describing groups is open to every user (names, states and members,
never offsets: OffsetFetch checks the topics); deleting a group or its offsets needs the right
to read every topic concerned (admins may always), else ``GROUP_AUTHORIZATION_FAILED``.
"""

from __future__ import annotations

import struct

from changefeed.engine.auth import ROOT
from changefeed.server.kafka import errors as E, versions as V
from changefeed.server.kafka.authz import ADMIN, READ
from changefeed.server.kafka.broker import Broker
from changefeed.server.kafka.groups import Group, State
from changefeed.server.kafka.session import Session
from changefeed.server.kafka.wire import MalformedRequest, Reader, Writer

__all__ = ["GroupAdminApis", "subscribed_topics"]

#: Kafka's AclOperation codes, as bits of DescribeGroups' authorized_operations.
_READ_OP, _DELETE_OP, _DESCRIBE_OP = 3, 6, 8
_UNSET_OPS = -(1 << 31)


def subscribed_topics(protocol_type: str, metadata: bytes) -> set[str]:
    """The topics a member of a ``consumer`` group subscribed to (ConsumerProtocolSubscription:
    version int16, topics [string], ...); empty for other protocol types or unreadable bytes."""
    if protocol_type != "consumer" or len(metadata) < 6:
        return set()
    try:
        r = Reader(metadata, 2)
        return set(r.array(Reader.string))
    except (MalformedRequest, struct.error):
        return set()


class GroupAdminApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.coordinator

    # -- helpers -----------------------------------------------------------------------------

    def _live(self, group_id: str) -> Group | None:
        g = self.coordinator.groups.get(group_id)
        return g if g is not None and g.members else None

    def _known(self, group_id: str) -> bool:
        """The coordinator knows the group (it had members since the endpoint started)."""
        return group_id in self.coordinator.groups

    def _state(self, group_id: str, has_offsets: bool) -> str | None:
        """Kafka's state name, or None when the group does not exist."""
        g = self._live(group_id)
        if g is not None:
            return g.state.value
        return State.EMPTY.value if has_offsets or self._known(group_id) else None

    def _may_manage(self, user: str, group_id: str) -> bool:
        """Runs in a worker thread: may ``user`` delete this group or its offsets?"""
        b = self.broker
        if b.authz.allowed(user, "", ADMIN):
            return True
        return all(b.authz.allowed(user, t, READ) for t in b.store.group_offsets(group_id))

    # -- ListGroups --------------------------------------------------------------------------

    async def list_groups(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.LIST_GROUPS]
        states: set[str] = set()
        types: set[str] = set()
        if version >= 4:
            states = {s.lower() for s in r.compact_array(Reader.compact_string)}
        if version >= 5:
            types = {t.lower() for t in r.compact_array(Reader.compact_string)}
        if flexible:
            r.tagged_fields()
        b = self.broker

        def work() -> list[tuple[str, str, str]]:
            with_offsets = set(b.store.groups())
            out = []
            for gid in sorted(with_offsets | set(self.coordinator.groups)):
                g = self._live(gid)
                state = g.state.value if g is not None else State.EMPTY.value
                ptype = g.protocol_type if g is not None else "consumer"
                out.append((gid, ptype, state))
            return out

        groups = await b.run(work)
        if states:
            groups = [g for g in groups if g[2].lower() in states]
        if types and "classic" not in types and "consumer" not in types:
            groups = []
        w = Writer()
        if version >= 1:
            w.int32(0)
        w.int16(E.NONE)
        if not flexible:
            w.array(groups, lambda w, g: w.string(g[0]).string(g[1]))
            return w.getvalue()

        def item(w: Writer, g: tuple[str, str, str]) -> None:
            w.compact_string(g[0]).compact_string(g[1])
            if version >= 4:
                w.compact_string(g[2])
            if version >= 5:
                w.compact_string("classic")
            w.tagged_fields()

        return w.compact_array(groups, item).tagged_fields().getvalue()

    # -- DescribeGroups ----------------------------------------------------------------------

    async def describe_groups(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.DESCRIBE_GROUPS]
        ids = r.compact_array(Reader.compact_string) if flexible else r.array(Reader.string)
        want_ops = r.boolean() if version >= 3 else False
        if flexible:
            r.tagged_fields()
        b = self.broker
        user = session.user or ROOT

        def offsets_of(gids: list[str]) -> tuple[set[str], bool]:
            return set(b.store.groups()) & set(gids), b.authz.allowed(user, "", ADMIN)

        with_offsets, admin = await b.run(offsets_of, ids)
        ops = (1 << _READ_OP) | (1 << _DELETE_OP) | (1 << _DESCRIBE_OP)
        w = Writer()
        if version >= 1:
            w.int32(0)

        def string(s: str | None) -> None:
            w.compact_string(s) if flexible else w.string(s)

        def blob(data: bytes) -> None:
            w.compact_bytes(data) if flexible else w.bytes_(data)

        w.uvarint(len(ids) + 1) if flexible else w.int32(len(ids))
        for gid in ids:
            state = self._state(gid, gid in with_offsets)
            g = self._live(gid)
            w.int16(E.NONE if gid else E.INVALID_GROUP_ID)
            string(gid)
            string(state or "Dead")
            string(g.protocol_type if g is not None else ("consumer" if state else ""))
            # protocol_data: the chosen assignor, once the group is past its join
            stable = g is not None and g.state in (State.STABLE, State.COMPLETING)
            string(g.protocol if g is not None and stable else "")
            members = list(g.members.values()) if g is not None else []
            w.uvarint(len(members) + 1) if flexible else w.int32(len(members))
            for m in members:
                string(m.member_id)
                if version >= 4:
                    string(None)  # group_instance_id: members are dynamic
                string(m.client_id)
                string(f"/{m.client_host}")
                blob(dict(m.protocols).get(g.protocol, b"") if g is not None and g.protocol else b"")
                blob(m.assignment if stable else b"")
                if flexible:
                    w.tagged_fields()
            if version >= 3:
                w.int32(ops if want_ops and (admin or state is not None) else _UNSET_OPS)
            if flexible:
                w.tagged_fields()
        if flexible:
            w.tagged_fields()
        return w.getvalue()

    # -- DeleteGroups ------------------------------------------------------------------------

    async def delete_groups(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.DELETE_GROUPS]
        ids = r.compact_array(Reader.compact_string) if flexible else r.array(Reader.string)
        if flexible:
            r.tagged_fields()
        b = self.broker
        user = session.user or ROOT

        def delete(gid: str) -> int:
            if not b.store.group_offsets(gid) and not self._known(gid):
                return E.GROUP_ID_NOT_FOUND
            if not self._may_manage(user, gid):
                return E.GROUP_AUTHORIZATION_FAILED
            b.store.delete_group_offsets(gid)
            return E.NONE

        results = []
        for gid in ids:
            if not gid:
                err = E.INVALID_GROUP_ID
            elif self._live(gid) is not None:
                err = E.NON_EMPTY_GROUP
            else:
                err = await b.run(delete, gid)
            if err == E.NONE:
                self.coordinator.groups.pop(gid, None)
            results.append((gid, err))
        w = Writer().int32(0)
        if not flexible:
            return w.array(results, lambda w, it: w.string(it[0]).int16(it[1])).getvalue()
        w.compact_array(results, lambda w, it: w.compact_string(it[0]).int16(it[1]).tagged_fields())
        return w.tagged_fields().getvalue()

    # -- OffsetDelete ------------------------------------------------------------------------

    async def offset_delete(self, session: Session, version: int, r: Reader) -> bytes:
        gid = r.string()
        topics = r.array(lambda r: (r.string(), r.array(Reader.int32)))
        b = self.broker
        user = session.user or ROOT
        g = self._live(gid)
        subscribed: set[str] = set()
        if g is not None:
            for m in g.members.values():
                for _, meta in m.protocols[:1]:
                    subscribed |= subscribed_topics(g.protocol_type, meta)

        def work() -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
            if not gid:
                return E.INVALID_GROUP_ID, []
            if g is None and not self._known(gid) and not b.store.group_offsets(gid):
                return E.GROUP_ID_NOT_FOUND, []
            if g is not None and g.protocol_type != "consumer":
                return E.NON_EMPTY_GROUP, []
            out = []
            for name, parts in topics:
                info, err = b.topic_for(user, name, READ)
                if info is None:
                    out.append((name, [(p, err) for p in parts]))
                    continue
                if info.name in subscribed:
                    out.append((name, [(p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in parts]))
                    continue
                bad = [p for p in parts if not 0 <= p < info.partitions]
                b.store.delete_group_offsets(gid, info.name, [p for p in parts if p not in bad])
                out.append((name, [(p, E.UNKNOWN_TOPIC_OR_PARTITION if p in bad else E.NONE) for p in parts]))
            return E.NONE, out

        error, result = await b.run(work)
        w = Writer().int16(error).int32(0)
        w.array(
            result,
            lambda w, t: w.string(t[0]).array(t[1], lambda w, pe: w.int32(pe[0]).int16(pe[1])),
        )
        return w.getvalue()
