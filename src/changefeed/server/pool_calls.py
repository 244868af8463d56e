"""Blocking calls of one connection's session, run on the endpoint's worker pool.

A session hands its engine calls to a thread pool so the event loop never blocks. When the
session's task is cancelled (the peer went away, the server stops), the awaiting coroutine stops
waiting but the call goes on in its thread; :meth:`PoolCalls.settle` waits for every such call, so
the session closes its connection only once nothing uses it (closing SQLite under a running
statement crashes the process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


class PoolCalls:
    def __init__(self, loop: asyncio.AbstractEventLoop, pool: Executor) -> None:
        self.loop = loop
        self.pool = pool
        self.inflight: set[asyncio.Future[Any]] = set()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the pool, tracked until it returns."""
        future = self.loop.run_in_executor(self.pool, lambda: fn(*args, **kwargs))
        self.inflight.add(future)
        future.add_done_callback(self.inflight.discard)
        return await future

    async def settle(self) -> None:
        """Return once no call made through :meth:`run` is still running (even if cancelled)."""
        while self.inflight:
            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait(set(self.inflight)))
