"""Kafka's topic admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs.

What ``kafka-topics --create/--delete/--alter --partitions``, ``kafka-configs --describe/--alter``
and the admin clients (confluent-kafka's ``create_partitions``, ``alter_configs``,
``incremental_alter_configs``, ...) call. Creating, deleting and changing topics is for admins
(``TOPIC_AUTHORIZATION_FAILED`` otherwise). A topic a changefeed writes belongs to the changefeed:
it sets the topic's partitions and retention, and ``DROP CHANGEFEED`` removes it, so deleting,
growing or reconfiguring it here is ``POLICY_VIOLATION``, with the reason in the error message
where the version has one (DeleteTopics v5+). Growing a topic (:meth:`TopicStore.add_partitions`)
and its retention (:meth:`TopicStore.set_retention`) are durable changes of the topic log: the
log applies them, in every process, and they survive restarts.

Every refusal is a ``changefeed.exceptions`` error answered with its Kafka code
(:func:`errors.error_of`) and its message.
"""

from __future__ import annotations

from collections import Counter

from changefeed.engine.auth import ROOT
from changefeed.exceptions import (
    ChangefeedError,
    InvalidArgument,
    InvalidStatement,
    PermissionDenied,
    UndefinedObject,
    UnsupportedFeature,
    WrongObjectType,
)
from changefeed.server.kafka import errors as E, topic_configs as C, versions as V
from changefeed.server.kafka.authz import ADMIN
from changefeed.server.kafka.broker import Broker
from changefeed.server.kafka.session import Session
from changefeed.server.kafka.topic_apis import AUTO_CREATE_PARTITIONS
from changefeed.server.kafka.wire import Reader, Writer, reader_for, writer_for
from changefeed.topics.store import DEFAULT_RETENTION_NS, MAX_PARTITIONS, TopicInfo

__all__ = ["TopicAdminApis"]

#: ConfigResource types (Kafka's ConfigResource.Type ids).
_TOPIC, _BROKER = 2, 4
#: DescribeConfigs' config sources.
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5


class TopicAdminApis:
    def __init__(self, broker: Broker, node_id: int) -> None:
        self.broker = broker
        self.node_id = node_id

    # -- helpers -----------------------------------------------------------------------------

    def _user_topic(self, user: str, name: str, change: str) -> TopicInfo:
        """Runs in a worker thread: the topic ``name`` that ``user`` is about to change (``change``:
        "deleted", "repartitioned", "reconfigured"); refused for non-admins, unknown topics and
        topics a changefeed writes."""
        b = self.broker
        if not b.authz.allowed(user, name, ADMIN):
            raise PermissionDenied(f"Only admins may change topics: {user} may not change '{name}'.")
        info = b.topic_or_none(name)
        if info is None:
            raise UndefinedObject(f"The topic '{name}' does not exist.")
        if b.authz.written_by_feed(info.name):
            raise WrongObjectType(
                f"Topic '{info.name}' is written by a changefeed, which owns it: it cannot be {change} "
                "through Kafka. DROP CHANGEFEED removes the changefeed and its topic."
            )
        return info

    # -- CreateTopics ------------------------------------------------------------------------

    async def create_topics(self, session: Session, version: int, r: Reader) -> bytes:
        def topic(r: Reader) -> tuple[str, int, int, list[tuple[str, str | None]]]:
            name = r.string()
            n = r.int32()
            rf = r.int16()
            r.array(lambda r: (r.int32(), r.array(Reader.int32)))
            configs = r.array(lambda r: (r.string(), r.nullable_string()))
            return name, n, rf, configs

        topics = r.array(topic)
        r.int32()
        validate_only = r.boolean() if version >= 1 else False
        b = self.broker

        def create(
            name: str, n: int, rf: int, configs: list[tuple[str, str | None]]
        ) -> tuple[int, str | None]:
            if not b.authz.allowed(session.user or ROOT, name, ADMIN):
                return E.TOPIC_AUTHORIZATION_FAILED, "Only admins may create topics."
            if b.topic_or_none(name) is not None:
                return E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
            try:  # as in Kafka, the configs are checked before the partitions
                retention = C.create(configs)
            except ChangefeedError as exc:
                return E.error_of(exc, E.INVALID_CONFIG), str(exc)
            if n == -1:
                n = 1
            if not 1 <= n <= MAX_PARTITIONS:
                return E.INVALID_PARTITIONS, f"Number of partitions must be in 1..{MAX_PARTITIONS}."
            if rf not in (-1, 1):
                return E.INVALID_REPLICATION_FACTOR, "Replication factor must be 1 (one broker)."
            if not name or not name.isprintable():
                return E.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal."
            if validate_only:
                return E.NONE, None
            try:
                b.store.ensure_topic(name, n, retention)
            except ChangefeedError as exc:
                return E.INVALID_REQUEST, str(exc)
            return E.NONE, None

        results = [(t[0], *(await b.run(create, *t))) for t in topics]
        w = Writer()
        if version >= 2:
            w.int32(0)
        w.int32(len(results))
        for name, err, msg in results:
            w.string(name).int16(err)
            if version >= 1:
                w.string(msg)
        return w.getvalue()

    # -- DeleteTopics ------------------------------------------------------------------------

    async def delete_topics(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.DELETE_TOPICS]
        r = reader_for(r, flexible)
        names = r.array(lambda r: r.string())
        r.int32()  # timeout
        r.tags()
        b = self.broker
        user = session.user or ROOT

        def delete(name: str) -> tuple[int, str | None]:
            try:
                info = self._user_topic(user, name, "deleted")
            except ChangefeedError as exc:
                return E.error_of(exc, E.INVALID_REQUEST), str(exc)
            b.store.drop_topic(info.name, missing_ok=True)
            return E.NONE, None

        results = [(n, *(await b.run(delete, n))) for n in names]
        w = writer_for(flexible)
        if version >= 1:
            w.int32(0)

        def result(w: Writer, it: tuple[str, int, str | None]) -> None:
            w.string(it[0]).int16(it[1])
            if version >= 5:
                w.string(it[2])
            w.tags()

        return w.array(results, result).tags().getvalue()

    # -- CreatePartitions --------------------------------------------------------------------

    async def create_partitions(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.CREATE_PARTITIONS]
        r = reader_for(r, flexible)

        def assignment(r: Reader) -> list[int]:
            ids = r.array(lambda r: r.int32())
            r.tags()
            return ids

        def topic(r: Reader) -> tuple[str, int, list[list[int]] | None]:
            name = r.string()
            count = r.int32()
            assignments = r.nullable_array(assignment)
            r.tags()
            return name, count, assignments

        topics = r.array(topic)
        r.int32()  # timeout
        validate_only = r.boolean()
        r.tags()
        b = self.broker
        user = session.user or ROOT
        times = Counter(name for name, _, _ in topics)

        def grow(name: str, count: int, assignments: list[list[int]] | None) -> tuple[int, str | None]:
            default = E.INVALID_PARTITIONS  # the code that refuses what is being checked
            try:
                if times[name] > 1:
                    raise InvalidStatement("Duplicate topic in request.")
                info = self._user_topic(user, name, "repartitioned")
                if count == info.partitions:
                    raise InvalidArgument(f"Topic already has {count} partition(s).")
                if count < info.partitions:
                    raise InvalidArgument(
                        f"The topic {name} currently has {info.partitions} partition(s); {count} would not "
                        "be an increase."
                    )
                if count > MAX_PARTITIONS:
                    raise InvalidArgument(f"Number of partitions must be at most {MAX_PARTITIONS}.")
                default = E.INVALID_REPLICA_ASSIGNMENT
                if assignments is not None:
                    self._check_assignments(count - info.partitions, assignments)
                if validate_only:
                    return E.NONE, None
                default = E.INVALID_PARTITIONS
                b.store.add_partitions(info.name, count)
            except ChangefeedError as exc:
                return E.error_of(exc, default), str(exc)
            return E.NONE, None

        results: list[tuple[str, int, str | None]] = []
        for name, count, a in topics:
            if all(name != done for done, _, _ in results):  # a duplicate is answered once
                results.append((name, *(await b.run(grow, name, count, a))))
        w = writer_for(flexible).int32(0)
        w.array(results, lambda w, it: w.string(it[0]).int16(it[1]).string(it[2]).tags())
        return w.tags().getvalue()

    def _check_assignments(self, additional: int, assignments: list[list[int]]) -> None:
        """The replicas asked for the new partitions: one each, on this broker (Kafka's checks
        of a manual assignment, for a one-broker cluster of replication factor 1)."""
        if len(assignments) != additional:
            raise InvalidArgument(
                f"Attempted to add {additional} additional partition(s), but only {len(assignments)} "
                "assignment(s) were specified."
            )
        for replicas in assignments:
            for broker in replicas:
                if broker != self.node_id:
                    raise InvalidArgument(
                        f"The manual partition assignment includes broker {broker}, but no such broker "
                        "is registered."
                    )
            if len(replicas) != 1:
                raise InvalidArgument(
                    f"The manual partition assignment includes a partition with {len(replicas)} "
                    "replica(s), but this is not consistent with previous partitions, which have 1 "
                    "replica(s)."
                )

    # -- DescribeConfigs ---------------------------------------------------------------------

    async def describe_configs(self, session: Session, version: int, r: Reader) -> bytes:
        resources = r.array(lambda r: (r.int8(), r.string(), r.nullable_array(Reader.string)))
        synonyms = r.boolean() if version >= 1 else False
        b = self.broker
        w = Writer().int32(0).int32(len(resources))
        for rtype, rname, keys in resources:
            configs: list[tuple[str, str, int]] = []  # name, value, source
            err, msg = E.NONE, None
            if rtype == _TOPIC:
                info = await b.run(b.topic_or_none, rname)
                if info is None:
                    err, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {rname} does not exist"
                else:
                    for spec in C.TOPIC_CONFIGS:
                        if spec.fixed is not None:
                            configs.append((spec.name, spec.fixed, _DEFAULT_CONFIG))
                        else:  # retention.ms
                            default = info.retention_ns == DEFAULT_RETENTION_NS
                            source = _DEFAULT_CONFIG if default else _DYNAMIC_TOPIC_CONFIG
                            configs.append((spec.name, C.retention_ms(info.retention_ns), source))
            elif rtype == _BROKER:
                configs = [
                    ("auto.create.topics.enable", "true", _STATIC_BROKER_CONFIG),
                    ("num.partitions", str(AUTO_CREATE_PARTITIONS), _STATIC_BROKER_CONFIG),
                ]
            else:
                err, msg = E.INVALID_REQUEST, f"resource type {rtype} is not supported"
            if keys:
                configs = [c for c in configs if c[0] in keys]
            w.int16(err).string(msg).int8(rtype).string(rname).int32(len(configs))
            for name, value, source in configs:
                w.string(name).string(value).boolean(False)
                if version == 0:
                    w.boolean(source == _DEFAULT_CONFIG)
                else:
                    w.int8(source)
                w.boolean(False)
                if version >= 1:
                    listed = synonyms and source == _DYNAMIC_TOPIC_CONFIG
                    w.int32(1 if listed else 0)
                    if listed:
                        w.string(name).string(value).int8(source)
        return w.getvalue()

    # -- AlterConfigs and IncrementalAlterConfigs --------------------------------------------

    async def alter_configs(self, session: Session, version: int, r: Reader) -> bytes:
        """The legacy AlterConfigs: a resource's configs are replaced by those given."""
        flexible = version >= V.FLEXIBLE[V.ALTER_CONFIGS]
        return await self._alter(session, reader_for(r, flexible), flexible, incremental=False)

    async def incremental_alter_configs(self, session: Session, version: int, r: Reader) -> bytes:
        flexible = version >= V.FLEXIBLE[V.INCREMENTAL_ALTER_CONFIGS]
        return await self._alter(session, reader_for(r, flexible), flexible, incremental=True)

    async def _alter(self, session: Session, r: Reader, flexible: bool, *, incremental: bool) -> bytes:
        def entry(r: Reader) -> tuple[str, int, str | None]:
            name = r.string()
            op = r.int8() if incremental else C.SET
            value = r.nullable_string()
            r.tags()
            return name, op, value

        def resource(r: Reader) -> tuple[int, str, list[tuple[str, int, str | None]]]:
            rtype = r.int8()
            name = r.string()
            entries = r.array(entry)
            r.tags()
            return rtype, name, entries

        resources = r.array(resource)
        validate_only = r.boolean()
        r.tags()
        b = self.broker
        user = session.user or ROOT

        def alter(
            rtype: int, name: str, entries: list[tuple[str, int, str | None]]
        ) -> tuple[int, str | None]:
            try:
                if rtype == _TOPIC:
                    info = self._user_topic(user, name, "reconfigured")
                    if incremental:
                        retention = C.alter_incrementally(info.retention_ns, entries)
                    else:
                        retention = C.replace_all([(n, v) for n, _, v in entries])
                    if not validate_only and retention != info.retention_ns:
                        b.store.set_retention(info.name, retention)
                elif rtype == _BROKER:
                    if not b.authz.allowed(user, "", ADMIN):
                        raise PermissionDenied(f"Only admins may change broker configs: {user} may not.")
                    raise UnsupportedFeature(
                        "The broker configs of this endpoint are fixed; topic retention.ms is the one "
                        "config that can be changed."
                    )
                else:
                    raise InvalidStatement(f"Unexpected resource type {rtype} for AlterConfigs.")
            except ChangefeedError as exc:
                code = E.error_of(exc, E.INVALID_CONFIG)
                if rtype == _BROKER and code == E.TOPIC_AUTHORIZATION_FAILED:
                    code = E.CLUSTER_AUTHORIZATION_FAILED
                return code, str(exc)
            return E.NONE, None

        results = [(t, n, *(await b.run(alter, t, n, e))) for t, n, e in resources]
        w = writer_for(flexible).int32(0)

        def response(w: Writer, it: tuple[int, str, int, str | None]) -> None:
            w.int16(it[2]).string(it[3]).int8(it[0]).string(it[1]).tags()

        return w.array(results, response).tags().getvalue()
