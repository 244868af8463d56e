"""Core changefeeds through the PostgreSQL endpoint: ``EXPERIMENTAL CHANGEFEED FOR ..`` and
``CREATE CHANGEFEED FOR ..`` without ``INTO`` answer rows ``table text, key bytea, value bytea``
as the feed produces them, until the client cancels or goes away (CockroachDB's sinkless feeds)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from changefeed.connection import Connection
from changefeed.server.pg import protocol as p, types as t
from changefeed.server.pg.errors import CancelledQuery
from changefeed.server.pg.portals import Prepared, Running, new_query_id
from changefeed.server.pg.values import fmt_of, hex_bytea, join_rows

if TYPE_CHECKING:
    from changefeed.pipeline.sinkless import Chunk, CoreChangefeed
    from changefeed.server.pg.session import PgSession

__all__ = ["run_stream"]


async def run_stream(
    session: PgSession,
    prep: Prepared,
    formats: Sequence[int] = (),
    describe: bool = True,
    params: Sequence[Any] = (),
) -> None:
    """Send a core changefeed's rows as they are produced; ends on cancel or disconnect.

    The feed runs on a thread of its own with a connection of its own: the thread hands each
    group of messages to the loop and waits until it is written, so nothing is buffered here.
    On cancel, disconnect or shutdown the client is answered at once and the feed is cancelled:
    its thread ends within one poll interval, even on an idle table, closing its connection."""
    oids = [t.TEXT, t.BYTEA, t.BYTEA]
    fmts = [fmt_of(list(formats), i) for i in range(3)]
    if describe:
        session.send(p.row_description(list(zip(["table", "key", "value"], oids, fmts, strict=True))))
    await session.flush(True)
    session.cancelled.clear()
    session.running = Running(new_query_id(), prep.sql, dt.datetime.now(dt.UTC))
    done: asyncio.Future[int] = session.loop.create_future()
    stop = threading.Event()
    feeds: list[CoreChangefeed] = []
    sent = 0

    def encode(i: int, v: Any) -> bytes | None:
        if v is None:
            return None
        if fmts[i] == 1 or i == 0:
            return v if isinstance(v, bytes) else str(v).encode()
        return b"\\x" + bytes(v).hex().encode()

    async def emit(data: bytes, count: int) -> None:
        nonlocal sent
        if stop.is_set():
            return
        session.send(data)
        sent += count
        await session.flush(True)

    def wire(group: Chunk) -> bytes:
        """A group's DataRows, column-wise when it is an ordinary batch of messages."""
        if group.keys is not None and not group.keys.null_count and not group.values.null_count:
            import pyarrow as pa

            n = len(group.values)
            cols = [pa.repeat(pa.scalar((group.table or "").encode(), pa.binary()), n)]
            for i, arr in ((1, group.keys), (2, group.values)):
                cols.append(arr if fmts[i] == 1 else hex_bytea(arr))
            return join_rows(cols, n)
        return b"".join(p.data_row([encode(i, v) for i, v in enumerate(m)]) for m in group.messages())

    def finish(fn: Callable[[Any], None], value: Any) -> None:
        if not done.done():
            fn(value)

    def produce() -> None:
        feed: CoreChangefeed | None = None
        own: Connection | None = None
        try:
            own = Connection(session.endpoint.db, user=session.user)
            feed = own.stream(prep.sql, list(params))
            feeds.append(feed)
            if stop.is_set():  # cancelled before the feed existed
                feed.cancel()
            for group in feed.batches():
                if stop.is_set():
                    break
                data = wire(group)
                asyncio.run_coroutine_threadsafe(emit(data, len(group.values)), session.loop).result()
            session.loop.call_soon_threadsafe(finish, done.set_result, sent)
        except BaseException as exc:
            session.loop.call_soon_threadsafe(finish, done.set_exception, exc)
        finally:
            with contextlib.suppress(Exception):
                if feed is not None:
                    feed.close()
            with contextlib.suppress(Exception):
                if own is not None:
                    own.close()

    thread = threading.Thread(target=produce, name=f"pg-changefeed-{session.pid}", daemon=True)
    thread.start()
    try:
        while not done.done():
            await asyncio.wait([done], timeout=0.2)
            if session.cancelled.is_set() or session.closing or session.reader.at_eof():
                break
    finally:
        stop.set()
        for feed in feeds:
            feed.cancel()
        session.running = None
    if not done.done():
        done.cancel()
        raise CancelledQuery("canceling statement due to user request")
    done.result()
    session.send(p.command_complete(f"SELECT {sent}"))
