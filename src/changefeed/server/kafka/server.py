"""The Kafka endpoint: connections, request framing, authentication and dispatch.

Requests on one connection are answered one at a time, in order, as a Kafka broker does. A
request this endpoint cannot parse (truncated, malformed, an API or version it does not
support) closes that connection only; other clients are unaffected. An unsupported ApiVersions
version is answered the way Kafka answers it (a v0 response with UNSUPPORTED_VERSION and the
supported range) so clients retry with a version both sides know.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import struct
from collections.abc import Awaitable, Callable

from changefeed.engine.privileges import ROOT
from changefeed.server import EndpointConfig
from changefeed.server.kafka import errors as E, versions as V
from changefeed.server.kafka.broker import Broker
from changefeed.server.kafka.group_admin import GroupAdminApis
from changefeed.server.kafka.group_apis import GroupApis
from changefeed.server.kafka.records import UnsupportedBatch
from changefeed.server.kafka.retention import RetentionTask, check_interval_ms
from changefeed.server.kafka.sasl import MECHANISMS, AuthFailed, PlainAuth, ScramAuth
from changefeed.server.kafka.session import Session
from changefeed.server.kafka.topic_admin import TopicAdminApis
from changefeed.server.kafka.topic_apis import TopicApis
from changefeed.server.kafka.wire import MalformedRequest, Reader, Writer

__all__ = ["KafkaEndpoint", "Session"]

log = logging.getLogger("changefeed.server.kafka")

#: Requests larger than this close the connection (Kafka's socket.request.max.bytes is 100 MiB).
MAX_REQUEST_BYTES = 100 * 1024 * 1024
NODE_ID = 1
CLUSTER_ID = "changefeed-embedded"

_SIZE = struct.Struct(">i")
#: Unsent bytes of a response in the transport's buffer above which the next part waits.
_DRAIN_AT = 256 * 1024
_PRE_AUTH = {V.API_VERSIONS, V.SASL_HANDSHAKE, V.SASL_AUTHENTICATE}


class CloseConnection(Exception):
    pass


#: A response body: bytes, or parts to write as they are (a Fetch's stored batches).
Body = bytes | list[bytes | bytearray | memoryview]
Handler = Callable[[Session, int, Reader], Awaitable[Body | None]]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class KafkaEndpoint:
    name = "kafka"

    def __init__(
        self,
        config: EndpointConfig,
        *,
        allow_anonymous: bool | None = None,
        retention_check_ms: int | None = None,
    ) -> None:
        self.config = config
        self.allow_anonymous = _is_loopback(config.host) if allow_anonymous is None else allow_anonymous
        #: how often topic retention is applied (Kafka's log.retention.check.interval.ms)
        self.retention_check_ms = check_interval_ms(retention_check_ms)
        self.broker: Broker | None = None
        self.retention: RetentionTask | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self.bound: tuple[str, int] = (config.host, config.port)

    async def start(self) -> tuple[str, int]:
        self.broker = Broker(self.config.db)
        self.broker.coordinator.start()
        topics = TopicApis(self.broker, NODE_ID, CLUSTER_ID)
        groups = GroupApis(self.broker, NODE_ID)
        group_admin = GroupAdminApis(self.broker)
        topic_admin = TopicAdminApis(self.broker, NODE_ID)
        self.handlers: dict[int, Handler] = {
            V.API_VERSIONS: self._api_versions,
            V.SASL_HANDSHAKE: self._sasl_handshake,
            V.SASL_AUTHENTICATE: self._sasl_authenticate,
            V.METADATA: topics.metadata,
            V.LIST_OFFSETS: topics.list_offsets,
            V.FETCH: topics.fetch,
            V.PRODUCE: topics.produce,
            V.INIT_PRODUCER_ID: topics.init_producer_id,
            V.CREATE_TOPICS: topic_admin.create_topics,
            V.DELETE_TOPICS: topic_admin.delete_topics,
            V.CREATE_PARTITIONS: topic_admin.create_partitions,
            V.DESCRIBE_CONFIGS: topic_admin.describe_configs,
            V.ALTER_CONFIGS: topic_admin.alter_configs,
            V.INCREMENTAL_ALTER_CONFIGS: topic_admin.incremental_alter_configs,
            V.FIND_COORDINATOR: groups.find_coordinator,
            V.JOIN_GROUP: groups.join_group,
            V.SYNC_GROUP: groups.sync_group,
            V.HEARTBEAT: groups.heartbeat,
            V.LEAVE_GROUP: groups.leave_group,
            V.OFFSET_COMMIT: groups.offset_commit,
            V.OFFSET_FETCH: groups.offset_fetch,
            V.LIST_GROUPS: group_admin.list_groups,
            V.DESCRIBE_GROUPS: group_admin.describe_groups,
            V.DELETE_GROUPS: group_admin.delete_groups,
            V.OFFSET_DELETE: group_admin.offset_delete,
        }
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port)
        sock = self._server.sockets[0].getsockname()
        self.bound = (str(sock[0]), int(sock[1]))
        self.retention = RetentionTask(self.broker.store, self.retention_check_ms)
        self.retention.start()
        return self.bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self.retention is not None:
            await self.retention.stop()
            self.retention = None
        if self.broker is not None:
            await self.broker.coordinator.stop()
            await asyncio.get_running_loop().run_in_executor(None, self.broker.close)

    # -- connections -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        metrics = self.config.metrics
        metrics.connection_opened(self.name)
        peer = writer.get_extra_info("peername") or ("?", 0)
        local = writer.get_extra_info("sockname") or (self.bound[0], self.bound[1])
        session = Session("", str(peer[0]), str(local[0]), self.bound[1])
        try:
            while True:
                try:
                    head = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = _SIZE.unpack(head)
                if size < 0 or size > MAX_REQUEST_BYTES:
                    metrics.error(self.name)
                    log.warning("kafka: %s sent a request of %d bytes; closing", peer, size)
                    return
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                metrics.request(self.name)
                try:
                    response = await self._handle(session, frame)
                except (MalformedRequest, CloseConnection, UnsupportedBatch) as exc:
                    metrics.error(self.name)
                    log.warning("kafka: closing connection from %s: %s", peer, exc)
                    return
                if response is not None:
                    header, body = response
                    if isinstance(body, bytes):
                        writer.write(_SIZE.pack(len(header) + len(body)) + header)
                        writer.write(body)  # record data is not copied again
                    else:  # parts (a fetch's stored batches): written as they are, nothing joined
                        size = len(header) + sum(map(len, body))
                        writer.write(_SIZE.pack(size) + header)
                        for part in body:
                            view = memoryview(part)  # slices of it are not copies
                            for at in range(0, len(view), _DRAIN_AT):
                                writer.write(view[at : at + _DRAIN_AT])
                                if writer.transport.get_write_buffer_size() > _DRAIN_AT:
                                    # the transport moves its whole unsent buffer down after
                                    # every send: kept short, megabytes of batches are not
                                    # copied over and over
                                    await writer.drain()
                    await writer.drain()
                if session.extra.get("close_after"):
                    return
        except asyncio.CancelledError:
            pass
        except ConnectionError:
            pass
        except Exception:
            metrics.error(self.name)
            log.exception("kafka: internal error serving %s; closing its connection", peer)
        finally:
            metrics.connection_closed(self.name)
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _handle(self, session: Session, frame: bytes) -> tuple[bytes, Body] | None:
        if session.raw_sasl:
            return await self._raw_sasl(session, frame)
        r = Reader(frame)
        api_key = r.int16()
        version = r.int16()
        correlation_id = r.int32()
        header = _SIZE.pack(correlation_id)
        if (
            api_key == V.API_VERSIONS
            and not V.SUPPORTED[V.API_VERSIONS][1] <= version <= V.SUPPORTED[V.API_VERSIONS][2]
        ):
            # Kafka's answer to an ApiVersions version it does not know: v0, UNSUPPORTED_VERSION,
            # and the ApiVersions range it supports, so the client retries with one of those.
            _, lo, hi = V.SUPPORTED[V.API_VERSIONS]
            w = Writer().int16(E.UNSUPPORTED_VERSION).int32(1).int16(V.API_VERSIONS).int16(lo).int16(hi)
            return header, w.getvalue()
        client_id = r.nullable_string()
        session.client_id = client_id or ""
        spec = V.SUPPORTED.get(api_key)
        if spec is None or not spec[1] <= version <= spec[2]:
            raise CloseConnection(f"unsupported request: api key {api_key} version {version}")
        flexible = version >= V.FLEXIBLE.get(api_key, 1 << 15)
        if flexible:
            r.tagged_fields()  # request header v2
            header += b"\x00"  # response header v1: no tagged fields
        if session.user is None and api_key not in _PRE_AUTH:
            if not self.allow_anonymous:
                raise CloseConnection(f"{spec[0]} before authentication")
            session.user = ROOT
        body = await self.handlers[api_key](session, version, r)
        if body is None:
            return None
        return header, body

    # -- ApiVersions and SASL ----------------------------------------------------------------

    async def _api_versions(self, session: Session, version: int, r: Reader) -> bytes:
        w = Writer().int16(E.NONE)
        items = sorted(V.SUPPORTED.items())
        w.array(items, lambda w, it: w.int16(it[0]).int16(it[1][1]).int16(it[1][2]))
        if version >= 1:
            w.int32(0)
        return w.getvalue()

    async def _sasl_handshake(self, session: Session, version: int, r: Reader) -> bytes:
        mechanism = r.string()
        w = Writer()
        assert self.broker is not None
        if session.user is not None and session.mechanism is not None:
            w.int16(E.ILLEGAL_SASL_STATE)
        elif mechanism == "PLAIN":
            session.mechanism = PlainAuth(self.broker.db)
            w.int16(E.NONE)
        elif mechanism == "SCRAM-SHA-256":
            session.mechanism = ScramAuth(self.broker.db)
            w.int16(E.NONE)
        else:
            w.int16(E.UNSUPPORTED_SASL_MECHANISM)
        w.array(list(MECHANISMS), Writer.string)
        if version == 0 and session.mechanism is not None:
            session.raw_sasl = True
        return w.getvalue()

    async def _sasl_step(self, session: Session, token: bytes) -> tuple[int, str | None, bytes]:
        mech = session.mechanism
        if mech is None:
            return E.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake", b""
        assert self.broker is not None
        try:
            out, done = await self.broker.run(mech.step, token)
        except AuthFailed as exc:
            return E.SASL_AUTHENTICATION_FAILED, str(exc), b""
        if done:
            assert mech.user is not None
            if not await self.broker.run(self.broker.authz.may_login, mech.user):
                return E.SASL_AUTHENTICATION_FAILED, f"Authentication failed: {mech.user} may not log in", b""
            session.user = mech.user
            session.mechanism = None
        return E.NONE, None, out

    async def _sasl_authenticate(self, session: Session, version: int, r: Reader) -> bytes:
        token = r.bytes_()
        error, message, out = await self._sasl_step(session, token)
        w = Writer().int16(error).string(message).bytes_(out)
        if version >= 1:
            w.int64(0)
        if error == E.SASL_AUTHENTICATION_FAILED:
            session.extra["close_after"] = True
        return w.getvalue()

    async def _raw_sasl(self, session: Session, frame: bytes) -> tuple[bytes, bytes]:
        error, message, out = await self._sasl_step(session, frame)
        if error != E.NONE:
            raise CloseConnection(message or "authentication failed")
        if session.mechanism is None:
            session.raw_sasl = False
        return b"", out  # raw tokens have no header
