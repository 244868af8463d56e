"""Blocking calls of one connection's session, run on the endpoint's worker pool.

A session hands its engine calls to a thread pool so the event loop never blocks. When the
session's task is cancelled (the peer went away, the server stops), the awaiting coroutine stops
waiting but the call goes on in its thread; :meth:`PoolCalls.settle` waits for every such call, so
the session closes its connection only once nothing uses it (closing SQLite under a running
statement crashes the process).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


class PoolCalls:
    def __init__(self, loop: asyncio.AbstractEventLoop, pool: Executor) -> None:
        self.loop = loop
        self.pool = pool
        #: The pool's futures of calls not finished yet. Not the loop's wrappers: a wrapper is
        #: done (cancelled) as soon as its awaiting task is cancelled, while the call still runs.
        self.inflight: set[concurrent.futures.Future[Any]] = set()

    def start(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Start ``fn(*args, **kwargs)`` on the pool, tracked until it returns; the loop's future
        of its result."""
        call: concurrent.futures.Future[T] = self.pool.submit(lambda: fn(*args, **kwargs))
        self.inflight.add(call)
        call.add_done_callback(self.inflight.discard)
        return asyncio.wrap_future(call, loop=self.loop)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the pool, tracked until it returns."""
        return await self.start(fn, *args, **kwargs)

    async def settle(self) -> None:
        """Return once no call made through :meth:`run` is still running (even if cancelled)."""
        while self.inflight:
            waiting = [asyncio.wrap_future(f, loop=self.loop) for f in list(self.inflight)]
            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait(waiting))
