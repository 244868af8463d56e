"""Waiting on an event loop for a database's write gate shared by several processes (the
PostgreSQL endpoint's workers; ``engine.database.WriteGate``).

A statement that runs on the loop takes the gate without waiting; when another process (or a
thread of this one) holds it, the statement waits here for the gate's doorbell, which every
release rings, then tries again on the loop. Before, it went to a pool thread that blocked on the
lock: once that thread had the lock it still needed the interpreter lock, which the busy loop
thread gives up only at its next wait for I/O or after the switch interval, and every writer of
every process waited meanwhile (two workers wrote half as many single-row transactions as one).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from changefeed.engine.database import Database, WriteGate

__all__ = ["LOOK_AGAIN_S", "ON_LOOP_S", "released", "run_inline"]

T = TypeVar("T")

#: A waiter looks again after this long even without a ring (a holder killed before it rang, a
#: gate whose doorbell could not be opened).
LOOK_AGAIN_S = 0.005
#: How long :func:`run_inline` waits on the loop for a held gate (another worker's statement
#: ends in well under this) before it hands the work to the pool: a writer that holds the gate
#: longer is in an explicit transaction, which may take as long as its client does.
ON_LOOP_S = 0.05


async def run_inline(
    db: Database,
    pool: Callable[..., Awaitable[T]],
    fn: Callable[..., T],
    *args: Any,
    wait_on_loop_s: float = ON_LOOP_S,
    refused: bool = False,
) -> T:
    """``fn(*args)`` on the running loop when its write transactions find ``db``'s write lock
    free (``Database.run_if_free``); when another writer holds it, wait for the gate's doorbell
    on the loop and try again there, for up to ``wait_on_loop_s``, then run it with ``pool``
    (which may block on the lock, off the loop). Only gates shared by several processes ring;
    a gate of this process alone goes to the pool at once. ``refused``: the caller's own try
    just found the lock held (the wait comes first)."""
    loop = asyncio.get_running_loop()
    deadline = 0.0
    while True:
        if not refused:
            ran, result = db.run_if_free(fn, *args)
            if ran:
                return cast(T, result)  # fn's own result, None included
        refused = False
        now = loop.time()
        deadline = deadline or now + wait_on_loop_s
        if not db.write_gate.shared or now >= deadline:
            return await pool(fn, *args)
        await released(db.write_gate, min(LOOK_AGAIN_S, deadline - now))


class _Bell:
    """The loop's registration on one gate's doorbell and the futures waiting for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.waiters: list[asyncio.Future[None]] = []

    def wait(self) -> asyncio.Future[None]:
        fut = self.loop.create_future()
        if not self.waiters:
            self.loop.add_reader(self.fd, self.rung)
        self.waiters.append(fut)
        return fut

    def rung(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.fd, 4096):
                pass  # every byte so far: the waiters all look now
        self.loop.remove_reader(self.fd)
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            _wake(fut)


_bells: dict[tuple[int, asyncio.AbstractEventLoop], _Bell] = {}


async def released(gate: WriteGate, timeout: float = LOOK_AGAIN_S) -> None:
    """Return when ``gate`` may have been released since the caller found it held (its doorbell
    rang, including rings from before the call), or after ``timeout`` s; then try again."""
    loop = asyncio.get_running_loop()
    fd = gate.bell()
    if fd < 0:
        await asyncio.sleep(timeout)
        return
    key = (fd, loop)
    bell = _bells.get(key)
    if bell is None:
        for stale in [k for k, b in _bells.items() if b.loop.is_closed()]:
            del _bells[stale]
        bell = _bells[key] = _Bell(loop, fd)
    fut = bell.wait()
    timer = loop.call_later(timeout, _wake, fut)
    try:
        await fut
    finally:
        timer.cancel()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
