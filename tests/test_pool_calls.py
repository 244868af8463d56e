"""A session's worker-pool calls outlive a cancelled caller; closing waits for them."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from changefeed.server.pool_calls import PoolCalls


def test_settle_waits_for_a_call_whose_caller_was_cancelled() -> None:
    finished = threading.Event()

    def slow() -> int:
        time.sleep(0.5)
        finished.set()
        return 1

    async def scenario() -> bool:
        with ThreadPoolExecutor(2) as pool:
            calls = PoolCalls(asyncio.get_running_loop(), pool)
            task = asyncio.ensure_future(calls.run(slow))
            await asyncio.sleep(0.05)
            task.cancel()  # the peer went away: the session's task is cancelled mid-call
            await asyncio.gather(task, return_exceptions=True)
            assert not finished.is_set()  # the call still runs in its thread
            await calls.settle()
            return finished.is_set()

    assert asyncio.run(scenario())


def test_settle_returns_at_once_when_nothing_runs() -> None:
    async def scenario() -> int:
        with ThreadPoolExecutor(1) as pool:
            calls = PoolCalls(asyncio.get_running_loop(), pool)
            assert await calls.run(lambda: 7) == 7
            await calls.settle()
            return len(calls.inflight)

    assert asyncio.run(scenario()) == 0
