"""A statement on an event loop that finds a shared write gate held waits for the gate's doorbell
(rung by every release) on the loop, not on a pool thread, and wakes as soon as it is free."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from changefeed.engine.database import WriteGate
from changefeed.server import gate_wait


def test_a_release_wakes_a_loop_waiter_at_once(tmp_path: Path) -> None:
    bell = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    holder = WriteGate(str(tmp_path / "x.db"), shared=True, bell=bell)
    # another process's gate: the same file and pipe, its own open file (flock is per open file)
    other = WriteGate(str(tmp_path / "x.db"), shared=True, bell=bell)
    try:
        assert holder.acquire(blocking=False)
        for _ in range(100):
            holder._ring()  # stale rings from before the wait: drained, never mistaken for a release

        async def waiter() -> float:
            t0 = time.monotonic()
            while not other.acquire(blocking=False):
                await gate_wait.released(other, timeout=10.0)
            other.release()
            return time.monotonic() - t0

        def release_later() -> None:
            time.sleep(0.3)
            holder.release()

        threading.Thread(target=release_later).start()
        waited = asyncio.run(waiter())
        assert 0.25 < waited < 2.0  # woken by the release's ring, not the 10 s timer
    finally:
        for fd in bell:
            os.close(fd)


def test_without_a_bell_the_waiter_looks_again_on_a_timer(tmp_path: Path) -> None:
    gate = WriteGate(str(tmp_path / "y.db"), shared=True)
    assert gate.bell() == -1

    async def once() -> float:
        t0 = time.monotonic()
        await gate_wait.released(gate, timeout=0.05)
        return time.monotonic() - t0

    assert 0.04 < asyncio.run(once()) < 1.0
